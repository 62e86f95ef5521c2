import { CancelAnswer, ControlType, EndReason, EventKind, ResumeVerdict, SessionState } from './gen/tether/cursor/v1/cursor.js';

/**
 * Proto enum values beside the wire spellings Tether uses everywhere else
 * (`Tether-Kind`, `Tether-End`, `Tether-Resume` headers, control messages).
 * Each table is total over the meaningful values; `fromX` returns
 * `undefined` for UNSPECIFIED, UNRECOGNIZED or an unknown spelling, so a
 * caller decides what a bad value means instead of getting a guess.
 */
const KINDS = [
  [EventKind.EVENT, 'event'],
  [EventKind.PRIME, 'prime'],
  [EventKind.END, 'end'],
] as const;
const END_REASONS = [
  [EndReason.COMPLETE, 'complete'],
  [EndReason.ABANDONED, 'abandoned'],
  [EndReason.DEADLINE, 'deadline'],
] as const;
const VERDICTS = [
  [ResumeVerdict.RESUMED, 'resumed'],
  [ResumeVerdict.MALFORMED, 'malformed'],
  [ResumeVerdict.UNKNOWN_SESSION, 'unknown_session'],
  [ResumeVerdict.EPOCH_MISMATCH, 'epoch_mismatch'],
  [ResumeVerdict.AHEAD, 'ahead'],
  [ResumeVerdict.DIVERGED, 'diverged'],
  [ResumeVerdict.TRUNCATED, 'truncated'],
  [ResumeVerdict.ABANDONED, 'abandoned'],
] as const;
const CONTROL_TYPES = [
  [ControlType.CLOSED, 'closed'],
  [ControlType.SUPERSEDED, 'superseded'],
  [ControlType.DRAIN, 'drain'],
  [ControlType.RELEASED, 'released'],
] as const;
/** The task table's spellings (`CancelAnswer` of @tether/session-log). */
const CANCEL_ANSWERS = [
  [CancelAnswer.ACCEPTED, 'accepted'],
  [CancelAnswer.NOT_RUNNING, 'not_running'],
  [CancelAnswer.GONE, 'gone'],
  [CancelAnswer.SILENT, 'silent'],
] as const;
const SESSION_STATES = [
  [SessionState.ACTIVE, 'active'],
  [SessionState.CLOSED, 'closed'],
] as const;

export type EventKindSpelling = (typeof KINDS)[number][1];
export type EndReasonSpelling = (typeof END_REASONS)[number][1];
export type ResumeVerdictSpelling = (typeof VERDICTS)[number][1];
export type ControlTypeSpelling = (typeof CONTROL_TYPES)[number][1];
export type SessionStateSpelling = (typeof SESSION_STATES)[number][1];
export type CancelAnswerSpelling = (typeof CANCEL_ANSWERS)[number][1];

type Table<E extends number, S extends string> = readonly (readonly [E, S])[];

function toSpelling<E extends number, S extends string>(table: Table<E, S>, value: number): S | undefined {
  return table.find(([e]) => e === value)?.[1];
}
function fromSpelling<E extends number, S extends string>(table: Table<E, S>, text: string): E | undefined {
  return table.find(([, s]) => s === text)?.[0];
}

/** `EventKind.EVENT` → `'event'`; undefined for UNSPECIFIED or unknown values. */
export const eventKindSpelling = (kind: number): EventKindSpelling | undefined => toSpelling(KINDS, kind);
/** `'event'` → `EventKind.EVENT`; undefined for anything else. */
export const eventKindFromSpelling = (text: string): EventKind | undefined => fromSpelling(KINDS, text);
export const endReasonSpelling = (reason: number): EndReasonSpelling | undefined => toSpelling(END_REASONS, reason);
export const endReasonFromSpelling = (text: string): EndReason | undefined => fromSpelling(END_REASONS, text);
export const resumeVerdictSpelling = (verdict: number): ResumeVerdictSpelling | undefined => toSpelling(VERDICTS, verdict);
export const resumeVerdictFromSpelling = (text: string): ResumeVerdict | undefined => fromSpelling(VERDICTS, text);
export const controlTypeSpelling = (type: number): ControlTypeSpelling | undefined => toSpelling(CONTROL_TYPES, type);
export const controlTypeFromSpelling = (text: string): ControlType | undefined => fromSpelling(CONTROL_TYPES, text);
export const sessionStateSpelling = (state: number): SessionStateSpelling | undefined => toSpelling(SESSION_STATES, state);
export const sessionStateFromSpelling = (text: string): SessionState | undefined => fromSpelling(SESSION_STATES, text);
export const cancelAnswerSpelling = (answer: number): CancelAnswerSpelling | undefined => toSpelling(CANCEL_ANSWERS, answer);
export const cancelAnswerFromSpelling = (text: string): CancelAnswer | undefined => fromSpelling(CANCEL_ANSWERS, text);
