/**
 * `npm run proto`: regenerates packages/cursor-proto/src/gen from proto/.
 *
 * Runs `buf generate` (buf.gen.yaml: the ts-proto plugin and its options)
 * into a temporary directory, adds the @generated header, writes the binary
 * FileDescriptorSet (`buf build`, for server reflection) as a module, then
 * replaces src/gen whole. buf comes from npm (`@bufbuild/buf`, a
 * devDependency), so no protoc is needed. The staleness test calls
 * `generateInto()` with a temp dir and diffs it against the committed files,
 * so both go through exactly this code.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const GEN_DIR = join(ROOT, 'packages/cursor-proto/src/gen');
/** The buf binary's npm wrapper (it runs the platform package's binary; no install script needed). */
export const BUF = join(ROOT, 'node_modules/.bin/buf');
/** The generation template: ts-proto from node_modules/.bin, its options, `out`. */
const TEMPLATE = join(ROOT, 'buf.gen.yaml');
/** Where buf.gen.yaml's `out` puts the files, under `buf generate -o <dir>`. */
const TEMPLATE_OUT = 'packages/cursor-proto/src/gen';
/** The hand-written protos, as buf.gen.yaml's `paths`; their imports (google/rpc, google/protobuf) come along. */
export const PROTO_FILES = ['proto/tether/cursor/v1/cursor.proto', 'proto/tether/operator/v1/operator.proto'];

const HEADER = (source: string): string =>
  `// @generated from ${source} by \`npm run proto\` (buf + ts-proto). DO NOT EDIT.\n` +
  '// A test fails when this file is stale: edit the .proto, then run `npm run proto`.\n';

/** Generates every file into `outDir` (created; existing files are overwritten, others left alone). */
export function generateInto(outDir: string): string[] {
  mkdirSync(outDir, { recursive: true });
  const paths = PROTO_FILES.flatMap((f) => ['--path', f]);
  // buf resolves the template's `local: node_modules/.bin/...` plugin and its
  // `out` against the working directory, hence cwd ROOT; `-o` is prepended to `out`.
  const scratch = mkdtempSync(join(tmpdir(), 'cursor-proto-buf-'));
  try {
    execFileSync(BUF, ['generate', 'proto', '--template', TEMPLATE, ...paths, '-o', scratch], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    for (const file of listFiles(join(scratch, TEMPLATE_OUT))) {
      const target = join(outDir, relative(join(scratch, TEMPLATE_OUT), file));
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, readFileSync(file));
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const descriptorPath = join(outDir, 'descriptor-set.binpb');
  // A plain FileDescriptorSet (no buf image metadata), imports and comments
  // included, as protoc's --include_imports --include_source_info gave.
  execFileSync(BUF, ['build', 'proto', ...paths, '--as-file-descriptor-set', '-o', descriptorPath], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  const descriptor = readFileSync(descriptorPath).toString('base64');
  rmSync(descriptorPath);
  writeFileSync(
    join(outDir, 'descriptor-set.ts'),
    '/**\n * The binary FileDescriptorSet of the cursor API and its imports (with\n * comments), base64: what server reflection serves to grpcurl and friends.\n */\n' +
      `export const descriptorSetBase64 =\n  '${descriptor}';\n`,
  );
  const files = listFiles(outDir);
  for (const file of files) {
    // The compiler version line is dropped (`protoc unknown` under buf, which
    // sends none; `protoc vX` under protoc): the output does not depend on it.
    const text = readFileSync(file, 'utf8').replace(/^\/\/ +protoc +[^\n]*\n/m, '');
    const source = /^\/\/ source: (.+)$/m.exec(text)?.[1] ?? 'proto/ (FileDescriptorSet)';
    writeFileSync(file, HEADER(source.startsWith('proto/') ? source : `proto/${source}`) + text);
  }
  return files.map((f) => relative(outDir, f));
}

export function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...listFiles(path));
    else out.push(path);
  }
  return out;
}

function main(): void {
  const tmp = mkdtempSync(join(tmpdir(), 'cursor-proto-'));
  try {
    const files = generateInto(join(tmp, 'gen'));
    rmSync(GEN_DIR, { recursive: true, force: true });
    mkdirSync(dirname(GEN_DIR), { recursive: true });
    renameSync(join(tmp, 'gen'), GEN_DIR);
    process.stdout.write(`generated ${files.length} files in ${relative(ROOT, GEN_DIR)}: ${files.join(', ')}\n`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
