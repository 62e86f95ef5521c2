import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Metadata } from '@grpc/grpc-js';
import {
  CancelAnswer,
  cancelAnswerFromSpelling,
  cancelAnswerSpelling,
  ControlType,
  controlTypeFromSpelling,
  controlTypeSpelling,
  EndReason,
  endReasonFromSpelling,
  endReasonSpelling,
  encodeStatusDetails,
  ErrorDetail,
  EventKind,
  eventKindFromSpelling,
  eventKindSpelling,
  readCallFailure,
  ResumeVerdict,
  resumeVerdictFromSpelling,
  resumeVerdictSpelling,
  SessionState,
  sessionStateFromSpelling,
  sessionStateSpelling,
  STATUS_DETAILS_KEY,
} from '@tether/cursor-proto';

describe('enum spellings', () => {
  const tables = [
    [EventKind, eventKindSpelling, eventKindFromSpelling, ['event', 'prime', 'end']],
    [EndReason, endReasonSpelling, endReasonFromSpelling, ['complete', 'abandoned', 'deadline']],
    [ResumeVerdict, resumeVerdictSpelling, resumeVerdictFromSpelling, ['resumed', 'malformed', 'unknown_session', 'epoch_mismatch', 'ahead', 'diverged', 'truncated', 'abandoned']],
    [ControlType, controlTypeSpelling, controlTypeFromSpelling, ['closed', 'superseded', 'drain', 'released']],
    [SessionState, sessionStateSpelling, sessionStateFromSpelling, ['active', 'closed']],
    [CancelAnswer, cancelAnswerSpelling, cancelAnswerFromSpelling, ['accepted', 'not_running', 'gone', 'silent']],
  ] as const;

  it('cover every meaningful enum value, both ways, and nothing else', () => {
    for (const [values, to, from, spellings] of tables) {
      const meaningful = Object.entries(values).filter(([name]) => name !== 'UNSPECIFIED' && name !== 'UNRECOGNIZED');
      expect(meaningful.map(([, v]) => (to as (n: number) => string | undefined)(v as number))).toEqual([...spellings]);
      for (const [, value] of meaningful) expect((from as (s: string) => number | undefined)((to as (n: number) => string)(value as number))).toBe(value);
      expect((to as (n: number) => string | undefined)(0)).toBeUndefined();
      expect((to as (n: number) => string | undefined)(-1)).toBeUndefined();
      expect((from as (s: string) => number | undefined)('UNSPECIFIED')).toBeUndefined();
    }
  });
});

describe('error details', () => {
  it('round-trip through the grpc-status-details-bin trailer', () => {
    const detail = ErrorDetail.fromPartial({ code: 'resume_refused', verdict: ResumeVerdict.TRUNCATED, sessionId: 's', log: { lastSeq: 12, nextSeq: 9 }, facts: { a: 'b' } });
    const metadata = new Metadata();
    metadata.set(STATUS_DETAILS_KEY, encodeStatusDetails(11, 'refused', detail));
    const failure = readCallFailure({ code: 11, details: 'refused', metadata });
    expect(failure).toEqual({ code: 11, message: 'refused', detail });
  });

  it('never throw on whatever arrives as the trailer', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), fc.integer(), (bytes, code) => {
        const metadata = new Metadata();
        metadata.set(STATUS_DETAILS_KEY, Buffer.from(bytes));
        const failure = readCallFailure({ code, details: 'x', metadata });
        expect(failure.code).toBe(code);
      }),
    );
    expect(readCallFailure(new Error('plain'))).toEqual({ code: 2, message: 'plain', detail: undefined });
    expect(readCallFailure(undefined)).toMatchObject({ code: 2, detail: undefined });
  });
});
