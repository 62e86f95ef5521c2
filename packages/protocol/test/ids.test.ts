import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  isEpoch,
  isSessionId,
  isStreamId,
  newEpoch,
  newSessionId,
  newStreamId,
  STANDALONE_STREAM,
} from '@tether/protocol';

describe('id predicates', () => {
  it('isEpoch accepts exactly 10 lowercase base32 characters', () => {
    expect(isEpoch('abcdefgh23')).toBe(true);
    expect(isEpoch('abcdefgh2')).toBe(false);
    expect(isEpoch('abcdefgh234')).toBe(false);
    expect(isEpoch('ABCDEFGH23')).toBe(false);
    expect(isEpoch('abcdefgh01')).toBe(false); // 0, 1, 8, 9 are not base32
    expect(isEpoch('abcdefgh2\n')).toBe(false);
    expect(isEpoch('')).toBe(false);
  });

  it("isStreamId accepts '0' or exactly 8 lowercase base32 characters", () => {
    expect(isStreamId(STANDALONE_STREAM)).toBe(true);
    expect(isStreamId('abcdef27')).toBe(true);
    expect(isStreamId('00')).toBe(false);
    expect(isStreamId('1')).toBe(false);
    expect(isStreamId('abcdef2')).toBe(false);
    expect(isStreamId('abcdef2-')).toBe(false);
    expect(isStreamId('ABCDEF27')).toBe(false);
  });

  it('isSessionId accepts exactly 22 base64url characters', () => {
    expect(isSessionId('AZaz09-_AZaz09-_AZaz09')).toBe(true);
    expect(isSessionId('AZaz09-_AZaz09-_AZaz0')).toBe(false);
    expect(isSessionId('AZaz09-_AZaz09-_AZaz09A')).toBe(false);
    expect(isSessionId('AZaz09+/AZaz09+/AZaz09')).toBe(false); // base64, not base64url
    expect(isSessionId('AZaz09-_AZaz09-_AZaz0=')).toBe(false);
  });

  it('predicates return false for non-strings instead of throwing', () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        const s = v as string;
        if (typeof v === 'string') return;
        expect(isEpoch(s) || isStreamId(s) || isSessionId(s)).toBe(false);
      }),
    );
  });
});

describe('id generators', () => {
  it('generate values their predicates accept', () => {
    for (let i = 0; i < 500; i++) {
      expect(isEpoch(newEpoch())).toBe(true);
      const stream = newStreamId();
      expect(isStreamId(stream)).toBe(true);
      expect(stream).not.toBe(STANDALONE_STREAM);
      expect(isSessionId(newSessionId())).toBe(true);
    }
  });

  it('do not repeat, and use the whole alphabet', () => {
    const sessions = new Set(Array.from({ length: 2000 }, newSessionId));
    expect(sessions.size).toBe(2000);
    const chars = new Set([...sessions].join(''));
    expect(chars.size).toBe(64);
    const epochChars = new Set(Array.from({ length: 500 }, newEpoch).join(''));
    expect(epochChars.size).toBe(32);
  });
});
