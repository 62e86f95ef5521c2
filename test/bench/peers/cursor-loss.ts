/**
 * What a store does with a cursor it no longer holds, found by running it
 * (never assumed): three cases, each on fresh streams, through the SDK's
 * own resume path (`getStreamIdForEventId` first when the store has it, as
 * the SDK transport calls it, then `replayEventsAfter`).
 *
 * - `trimmed`: the stream's oldest events were dropped by its ring buffer or
 *   retention (25 stored, 10 kept), and the cursor is the 3rd;
 * - `restart`: the cursor is from before the store restarted (the process,
 *   and the server behind it if any; a crash, SIGKILL);
 * - `unknown`: a well-formed cursor this session's store never issued
 *   (issued by the store of another session).
 *
 * Verdicts: `explicit` (an error: the SDK answers 500, or 400 when
 * `getStreamIdForEventId` finds nothing), `silent` (success with nothing,
 * with a gap, or with events that are not the continuation), `held` (the
 * store still had the cursor and sent exactly the continuation: no loss),
 * `n/a` (the store never drops an event, so nothing is trimmed).
 */
import { randomUUID } from 'node:crypto';
import type { JsonRpcMessage } from '@tether/sdk';
import { notification, response } from '../sdk/stores.js';
import type { BenchEventStore } from '../sdk/stores.js';

export const CursorCase = { trimmed: 'trimmed', restart: 'restart', unknown: 'unknown' } as const;
export type CursorCase = (typeof CursorCase)[keyof typeof CursorCase];
export const CURSOR_CASES = Object.values(CursorCase);

/** How the tables name each case. */
export const CursorCaseName: Record<CursorCase, string> = {
  trimmed: 'trimmed from the ring buffer',
  restart: 'from before a restart',
  unknown: 'unknown (another session’s)',
};

export const VerdictKind = { explicit: 'explicit', silent: 'silent', held: 'held', na: 'n/a' } as const;
export type VerdictKind = (typeof VerdictKind)[keyof typeof VerdictKind];

export interface CursorOutcome {
  readonly kind: VerdictKind;
  /** What happened, in a few words (the error, or what was sent and returned). */
  readonly detail: string;
  /** Events sent, events a correct continuation holds, of those not sent, and sent events not in it. */
  readonly sent: number;
  readonly expected: number;
  readonly missing: number;
  readonly foreign: number;
}

export interface CursorLossRow {
  readonly store: string;
  readonly case: CursorCase;
  readonly outcome: CursorOutcome;
}

/** A store under probe: how to get a fresh one, one with a small ring, and one after a restart. */
export interface ProbeSubject {
  readonly name: string;
  /** A store for a fresh session. */
  open(): Promise<BenchEventStore>;
  /** A store that keeps at most `ring` events per stream; absent when the store never drops one. */
  openRing?(ring: number): Promise<BenchEventStore>;
  /** The same session's store as it comes back after a crash of the process (and of its server, if any). */
  restart(before: BenchEventStore): Promise<BenchEventStore>;
  /** What `restart` restarts, for the table. */
  readonly restartNote: string;
  /** Why `openRing` is absent. */
  readonly neverTrims?: string;
}

const RING = 10;
const TRIM_EVENTS = 25;
const TRIM_CURSOR = 2;
const RESTART_EVENTS = 20;
const RESTART_CURSOR = 9;
const ANSWER_WITHIN_MS = 5_000;

export async function probeCursorLoss(subject: ProbeSubject): Promise<CursorLossRow[]> {
  const row = (c: CursorCase, outcome: CursorOutcome): CursorLossRow => ({ store: subject.name, case: c, outcome });
  const rows: CursorLossRow[] = [];

  if (subject.openRing === undefined) {
    rows.push(row(CursorCase.trimmed, { kind: VerdictKind.na, detail: subject.neverTrims ?? 'never drops an event', sent: 0, expected: 0, missing: 0, foreign: 0 }));
  } else {
    const store = await subject.openRing(RING);
    const ids = await writeStream(store, TRIM_EVENTS);
    rows.push(row(CursorCase.trimmed, await resumeOutcome(store, ids[TRIM_CURSOR] as string, ids.slice(TRIM_CURSOR + 1))));
  }

  const before = await subject.open();
  const written = await writeStream(before, RESTART_EVENTS);
  const after = await subject.restart(before);
  rows.push(row(CursorCase.restart, await resumeOutcome(after, written[RESTART_CURSOR] as string, written.slice(RESTART_CURSOR + 1))));

  const mine = await subject.open();
  const other = await subject.open();
  await writeStream(mine, 3);
  const foreign = await writeStream(other, 3);
  rows.push(row(CursorCase.unknown, await resumeOutcome(mine, foreign[1] as string, undefined)));
  return rows;
}

/** One POST stream of `n` events: progress notifications, then the response that ends it. */
async function writeStream(store: BenchEventStore, n: number): Promise<string[]> {
  const stream = randomUUID();
  const ids: string[] = [];
  for (let k = 0; k < n - 1; k += 1) ids.push(await store.storeEvent(stream, notification(stream, k)));
  ids.push(await store.storeEvent(stream, response(1) as JsonRpcMessage));
  return ids;
}

/**
 * Resumes at `cursor` the way the SDK transport does and classifies the
 * answer against `expected`, the continuation a correct store sends
 * (`undefined`: there is none, the cursor was never this store's).
 */
export async function resumeOutcome(store: BenchEventStore & { getStreamIdForEventId?(id: string): Promise<string | undefined> }, cursor: string, expected: readonly string[] | undefined): Promise<CursorOutcome> {
  const want = expected ?? [];
  const none = { sent: 0, expected: want.length, missing: want.length, foreign: 0 };
  if (typeof store.getStreamIdForEventId === 'function') {
    try {
      if ((await store.getStreamIdForEventId(cursor)) === undefined) return { kind: VerdictKind.explicit, detail: 'getStreamIdForEventId: undefined (the SDK answers 400)', ...none };
    } catch (err) {
      return { kind: VerdictKind.explicit, detail: `getStreamIdForEventId threw: ${describe(err)}`, ...none };
    }
  }
  const sent: string[] = [];
  let answer: { returned: string } | { threw: unknown } | 'late';
  let timer: NodeJS.Timeout | undefined;
  try {
    answer = await Promise.race([
      store.replayEventsAfter(cursor, { send: async (id) => void sent.push(id) }).then(
        (returned) => ({ returned }),
        (threw: unknown) => ({ threw }),
      ),
      new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ANSWER_WITHIN_MS))),
    ]);
  } finally {
    clearTimeout(timer);
  }
  const wanted = new Set(want);
  const counts = { sent: sent.length, expected: want.length, missing: want.filter((id) => !sent.includes(id)).length, foreign: sent.filter((id) => !wanted.has(id)).length };
  if (answer === 'late') return { kind: VerdictKind.silent, detail: `no answer within ${ANSWER_WITHIN_MS / 1000} s (${sent.length} sent)`, ...counts };
  if ('threw' in answer) return { kind: VerdictKind.explicit, detail: `threw: ${describe(answer.threw)}${sent.length > 0 ? ` after ${sent.length} sent` : ''} (the SDK answers 500)`, ...counts };
  const returned = `returned ${JSON.stringify(answer.returned)}`;
  if (expected !== undefined && sent.length === want.length && sent.every((id, i) => id === want[i])) return { kind: VerdictKind.held, detail: `resumed: the ${want.length} events after it, in order; ${returned}`, ...counts };
  if (sent.length === 0) return { kind: VerdictKind.silent, detail: `nothing sent, ${returned}`, ...counts };
  const parts = [`sent ${sent.length}`];
  if (expected !== undefined) parts.push(`${counts.missing} of the ${want.length} after it missing`);
  if (counts.foreign > 0) parts.push(`${counts.foreign} not after it`);
  return { kind: VerdictKind.silent, detail: `${parts.join(', ')}; ${returned}`, ...counts };
}

function describe(err: unknown): string {
  const e = err as { code?: unknown; fields?: { verdict?: unknown }; message?: unknown };
  if (typeof e?.code === 'string') return `${e.code}${e.fields?.verdict !== undefined ? ` (${String(e.fields.verdict)})` : ''}`;
  const text = typeof e?.message === 'string' ? e.message : String(err);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
