import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONTRACT_IMAGE, breakingChanges, lintFindings } from '../scripts/contract.js';
import { ROOT } from '../scripts/generate.js';

const tmp = mkdtempSync(join(tmpdir(), 'cursor-proto-contract-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const CURSOR_PROTO = 'proto/tether/cursor/v1/cursor.proto';

/** A scratch copy of the module (proto/ and buf.yaml) with cursor.proto edited: the real one is never touched. */
function scratchWith(name: string, edit: (proto: string) => string): string {
  const dir = join(tmp, name);
  cpSync(join(ROOT, 'proto'), join(dir, 'proto'), { recursive: true });
  cpSync(join(ROOT, 'buf.yaml'), join(dir, 'buf.yaml'));
  const before = readFileSync(join(dir, CURSOR_PROTO), 'utf8');
  const after = edit(before);
  expect(after, 'the scratch edit changed nothing').not.toBe(before);
  writeFileSync(join(dir, CURSOR_PROTO), after);
  return dir;
}

describe('the gRPC contract (buf.yaml)', () => {
  it('`buf lint` finds nothing in proto/', () => {
    const found = lintFindings();
    expect(found, `buf lint:\n${found.join('\n')}`).toEqual([]);
  });

  it(`has no breaking change against ${CONTRACT_IMAGE} (refresh it only to change the API on purpose: npm run proto:image)`, () => {
    const found = breakingChanges();
    expect(found, `buf breaking --against ${CONTRACT_IMAGE}:\n${found.join('\n')}`).toEqual([]);
  });

  // The checks above must be able to fail: the same functions on edited copies.
  it('the breaking check reports a renumbered field', () => {
    const dir = scratchWith('renumbered', (p) => p.replace(/^(message Session \{[^}]*?string session_id = )1;/m, '$199;'));
    const found = breakingChanges(dir);
    expect(found.length, found.join('\n')).toBeGreaterThan(0);
    expect(found.some((f) => f.startsWith(`${CURSOR_PROTO}:`) && f.includes('"session_id"') && f.includes('(FIELD_NO_DELETE)')), found.join('\n')).toBe(true);
  });

  it('the lint check reports a badly named message', () => {
    const dir = scratchWith('misnamed', (p) => `${p}\nmessage bad_name {}\n`);
    const found = lintFindings(dir);
    expect(found.some((f) => f.startsWith(`${CURSOR_PROTO}:`) && f.includes('(MESSAGE_PASCAL_CASE)')), found.join('\n')).toBe(true);
  });
});
