import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import * as guard from '@tether/resume-guard';

const here = (p: string): URL => new URL(p, import.meta.url);

describe('package boundary', () => {
  it('exports exactly the public runtime surface', () => {
    expect(Object.keys(guard).sort()).toEqual(
      [
        'DEFAULT_MAX_TRACKED_IDS',
        'RESUME_VIOLATION_RPC_CODE',
        'ResumeGuardError',
        'ResumeGuardErrorCode',
        'ResumeViolationCode',
        'ResumeViolationError',
        'StreamCheck',
        'StreamHistory',
        'createResumeGuard',
        'isResumeViolation',
        'shapeOf',
        'successorOf',
      ].sort(),
    );
  });

  it('depends at runtime on @tether/protocol only, which depends on nothing', () => {
    const pkg = JSON.parse(readFileSync(here('../package.json'), 'utf8')) as Record<string, unknown>;
    expect(pkg['dependencies']).toEqual({ '@tether/protocol': '0.1.0' });
    expect(pkg['peerDependencies']).toBeUndefined();
    const protocol = JSON.parse(readFileSync(here('../../protocol/package.json'), 'utf8')) as Record<string, unknown>;
    expect(protocol['dependencies']).toBeUndefined();
  });

  it('source stays browser-safe and imports nothing else', () => {
    for (const file of readdirSync(here('../src'))) {
      const text = readFileSync(here(`../src/${file}`), 'utf8');
      expect(text, file).not.toMatch(/from\s+['"]node:/);
      expect(text, file).not.toMatch(/\bBuffer\b|\bprocess\./);
      expect(text, file).not.toMatch(/^\s*export\s+\*/m);
      for (const m of text.matchAll(/from\s+['"]([^'"]+)['"]/g)) expect(m[1], file).toMatch(/^(\.\/|@tether\/protocol$)/);
    }
  });

  it('a violation carries a stable code and its ids, and serializes them', () => {
    const err = new guard.ResumeViolationError('gap', 'gap resuming from 3', { lastEventId: '3', eventId: '7', expectedEventId: '4' });
    expect(guard.isResumeViolation(err, 'gap')).toBe(true);
    expect(guard.isResumeViolation(err, 'fork')).toBe(false);
    expect(err).toBeInstanceOf(guard.ResumeGuardError);
    expect(err.toJSON()).toEqual({ code: 'gap', message: 'gap resuming from 3', lastEventId: '3', eventId: '7', expectedEventId: '4' });
  });
});
