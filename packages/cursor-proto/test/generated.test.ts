import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GEN_DIR, generateInto, listFiles } from '../scripts/generate.js';

const tmp = mkdtempSync(join(tmpdir(), 'cursor-proto-check-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('generated code', () => {
  // Runs buf + ts-proto exactly as `npm run proto` does, into a temp dir.
  it('src/gen is what `npm run proto` generates from proto/ now (run it after editing a .proto)', () => {
    const fresh = join(tmp, 'gen');
    generateInto(fresh);
    const committed = listFiles(GEN_DIR).map((f) => relative(GEN_DIR, f));
    const generated = listFiles(fresh).map((f) => relative(fresh, f));
    expect(committed).toEqual(generated);
    for (const file of generated) {
      const same = readFileSync(join(GEN_DIR, file), 'utf8') === readFileSync(join(fresh, file), 'utf8');
      expect(same, `${file} is stale: run \`npm run proto\``).toBe(true);
    }
  });

  it('every generated file is marked @generated', () => {
    for (const file of listFiles(GEN_DIR)) expect(readFileSync(file, 'utf8').split('\n')[0]).toMatch(/^\/\/ @generated from proto\//);
  });
});
