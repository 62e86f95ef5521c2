import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import * as protocol from '@tether/protocol';

const here = (p: string): URL => new URL(p, import.meta.url);

describe('package boundary', () => {
  it('exports exactly the public runtime surface', () => {
    expect(Object.keys(protocol).sort()).toEqual(
      [
        'DEFAULT_MAX_BLOCK_BYTES',
        'DEFAULT_MAX_LINE_BYTES',
        'EPOCH_LENGTH',
        'EndReason',
        'EventKind',
        'HttpHeader',
        'LogHeader',
        'MAX_EVENT_ID_LENGTH',
        'MAX_RESUME_ACK_LENGTH',
        'RESUME_ACK_EVENT',
        'ProtocolError',
        'ProtocolErrorCode',
        'ResumeVerdict',
        'SESSION_ID_LENGTH',
        'STANDALONE_STREAM',
        'STREAM_ID_LENGTH',
        'SseLimitError',
        'SseParser',
        'compareEventIds',
        'decodeEventId',
        'encodeEventId',
        'encodeResumeAck',
        'encodeSseComment',
        'encodeSseEvent',
        'isEndReason',
        'isEpoch',
        'isEventKind',
        'isResumeAck',
        'isResumeVerdict',
        'isSessionId',
        'isSseLimitError',
        'isStreamId',
        'newEpoch',
        'newSessionId',
        'newStreamId',
        'parseResumeAck',
      ].sort(),
    );
  });

  it('has no runtime dependencies', () => {
    const pkg = JSON.parse(readFileSync(here('../package.json'), 'utf8')) as Record<string, unknown>;
    expect(pkg['dependencies']).toBeUndefined();
    expect(pkg['peerDependencies']).toBeUndefined();
  });

  it('source stays browser-safe and re-exports nothing wholesale', () => {
    for (const file of readdirSync(here('../src'))) {
      const text = readFileSync(here(`../src/${file}`), 'utf8');
      expect(text, file).not.toMatch(/from\s+['"]node:/);
      expect(text, file).not.toMatch(/\bBuffer\b|\bprocess\./);
      expect(text, file).not.toMatch(/^\s*export\s+\*/m);
      // Relative imports only: no third-party module can sneak in.
      for (const m of text.matchAll(/from\s+['"]([^'"]+)['"]/g)) expect(m[1], file).toMatch(/^\.\//);
    }
  });
});
