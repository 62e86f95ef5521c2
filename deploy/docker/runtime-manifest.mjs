#!/usr/bin/env node
// Used by the Dockerfiles (build stage): turns the monorepo's root
// package.json into the manifest of one service's runtime install.
//
//   node runtime-manifest.mjs <repo> <service workspace dir> <out dir>
//
// npm installs the production dependencies of *every* workspace listed in the
// root manifest, even with `--workspace` (a workspace is a production root),
// so the test kit and examples would land in every image. This keeps only
// the service's workspace and the @tether/* workspaces it depends on
// (transitively, `dependencies` only) and drops the root devDependencies.
// It writes <out>/package.json, copies package-lock.json (npm keeps the
// locked versions and prunes the rest), copies each kept workspace's
// package.json, and prints the kept workspace dirs, one per line.
import { cpSync, mkdirSync, readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const [repo, service, out] = process.argv.slice(2);
if (repo === undefined || service === undefined || out === undefined) {
  process.stderr.write('usage: runtime-manifest.mjs <repo> <service workspace dir> <out dir>\n');
  process.exit(2);
}
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));
const root = readJson(join(repo, 'package.json'));

// Workspace name -> dir, from the root's workspace globs (`dir/*` only).
const byName = new Map();
for (const pattern of root.workspaces ?? []) {
  if (!pattern.endsWith('/*')) throw new Error(`unsupported workspace pattern ${pattern}`);
  const parent = pattern.slice(0, -2);
  if (!existsSync(join(repo, parent))) continue;
  for (const entry of readdirSync(join(repo, parent), { withFileTypes: true })) {
    const manifest = join(repo, parent, entry.name, 'package.json');
    if (entry.isDirectory() && existsSync(manifest)) byName.set(readJson(manifest).name, `${parent}/${entry.name}`);
  }
}

const keep = new Set();
const visit = (dir) => {
  if (keep.has(dir)) return;
  keep.add(dir);
  for (const dep of Object.keys(readJson(join(repo, dir, 'package.json')).dependencies ?? {})) {
    const depDir = byName.get(dep);
    if (depDir !== undefined) visit(depDir);
  }
};
if (!existsSync(join(repo, service, 'package.json'))) throw new Error(`no workspace at ${service}`);
visit(service);

const dirs = [...keep].sort();
mkdirSync(out, { recursive: true });
const { devDependencies: _dev, scripts: _scripts, ...rest } = root;
writeFileSync(join(out, 'package.json'), `${JSON.stringify({ ...rest, workspaces: dirs }, null, 2)}\n`);
cpSync(join(repo, 'package-lock.json'), join(out, 'package-lock.json'));
for (const dir of dirs) {
  mkdirSync(join(out, dir), { recursive: true });
  cpSync(join(repo, dir, 'package.json'), join(out, dir, 'package.json'));
}
process.stdout.write(`${dirs.join('\n')}\n`);
