import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  EndReason,
  EventKind,
  HttpHeader,
  isEndReason,
  isEventKind,
  isResumeVerdict,
  LogHeader,
  ResumeVerdict,
} from '@tether/protocol';

describe('verdicts and wire names', () => {
  it('ResumeVerdict has the wire spellings of DESIGN §7', () => {
    expect(Object.values(ResumeVerdict).sort()).toEqual(
      ['abandoned', 'ahead', 'diverged', 'epoch_mismatch', 'malformed', 'resumed', 'truncated', 'unknown_session'],
    );
  });

  it('predicates accept exactly their tables', () => {
    for (const v of Object.values(ResumeVerdict)) expect(isResumeVerdict(v)).toBe(true);
    for (const v of Object.values(EventKind)) expect(isEventKind(v)).toBe(true);
    for (const v of Object.values(EndReason)) expect(isEndReason(v)).toBe(true);
    // Keys are not values: the camelCase key must not pass as a wire value.
    expect(isResumeVerdict('unknownSession')).toBe(false);
    expect(isResumeVerdict('RESUMED')).toBe(false);
    expect(isEventKind('toString')).toBe(false);
    expect(isEndReason('constructor')).toBe(false);
  });

  it('predicates never throw and reject non-strings', () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        const known = [...Object.values(ResumeVerdict), ...Object.values(EventKind), ...Object.values(EndReason)];
        const expected = typeof v === 'string' && known.includes(v as never);
        expect(isResumeVerdict(v) || isEventKind(v) || isEndReason(v)).toBe(expected);
      }),
    );
  });

  it('HTTP header names are lowercase; NATS header names keep their case', () => {
    for (const name of Object.values(HttpHeader)) expect(name).toBe(name.toLowerCase());
    expect(LogHeader.msgId).toBe('Nats-Msg-Id');
    expect(LogHeader.epoch).toBe('Tether-Epoch');
  });
});
