/**
 * `npm run proto`: regenerates packages/cursor-proto/src/gen from proto/.
 *
 * Runs protoc with ts-proto into a temporary directory, adds the @generated
 * header, writes the binary FileDescriptorSet (for server reflection) as a
 * module, then replaces src/gen whole. The staleness test calls
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
const PROTO_DIR = join(ROOT, 'proto');
/** The hand-written protos; their imports (google/rpc, google/protobuf) come along. */
export const PROTO_FILES = ['tether/cursor/v1/cursor.proto'];
/** ts-proto options (TOOLCHAIN.md), plus `as const` enums without prefixes (house style) and no JSON methods (unused). */
export const TS_PROTO_OPTIONS = [
  'outputServices=grpc-js',
  'esModuleInterop=true',
  'env=node',
  'importSuffix=.js',
  'enumsAsLiterals=true',
  'removeEnumPrefix=true',
  'outputJsonMethods=false',
].join(',');

const HEADER = (source: string): string =>
  `// @generated from ${source} by \`npm run proto\` (protoc + ts-proto). DO NOT EDIT.\n` +
  '// A test fails when this file is stale: edit the .proto, then run `npm run proto`.\n';

/** Generates every file into `outDir` (created; existing files are overwritten, others left alone). */
export function generateInto(outDir: string): string[] {
  const plugin = join(ROOT, 'node_modules/.bin/protoc-gen-ts_proto');
  mkdirSync(outDir, { recursive: true });
  const protos = PROTO_FILES.map((f) => join(PROTO_DIR, f));
  execFileSync('protoc', [`--plugin=protoc-gen-ts_proto=${plugin}`, `--ts_proto_out=${outDir}`, `--ts_proto_opt=${TS_PROTO_OPTIONS}`, `-I${PROTO_DIR}`, ...protos], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const descriptorPath = join(outDir, 'descriptor-set.bin');
  execFileSync('protoc', ['--include_imports', '--include_source_info', `--descriptor_set_out=${descriptorPath}`, `-I${PROTO_DIR}`, ...protos], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const descriptor = readFileSync(descriptorPath).toString('base64');
  rmSync(descriptorPath);
  writeFileSync(
    join(outDir, 'descriptor-set.ts'),
    '/**\n * The binary FileDescriptorSet of the cursor API and its imports (with\n * comments), base64: what server reflection serves to grpcurl and friends.\n */\n' +
      `export const descriptorSetBase64 =\n  '${descriptor}';\n`,
  );
  const files = listFiles(outDir);
  for (const file of files) {
    // The protoc version line is dropped: the output does not depend on it,
    // and a contributor's protoc should not make the staleness test fail.
    const text = readFileSync(file, 'utf8').replace(/^\/\/ +protoc +v[^\n]*\n/m, '');
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
