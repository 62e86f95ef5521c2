import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as api from '@tether/cursor-proto';

describe('package boundary', () => {
  it('exports by name only (no export *), and gen is reached only through the entry', () => {
    const index = readFileSync(new URL('../src/index.ts', import.meta.url), 'utf8');
    expect(index).not.toMatch(/export \*/);
    expect(Object.keys(api).sort()).toMatchSnapshot();
  });
});
