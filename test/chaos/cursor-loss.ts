/**
 * Cursor losses of SDK clients: found from the recorded exchanges, judged
 * against the log. Part of the checker (`checker.ts`).
 */
import { decodeEventId } from '@tether/protocol';
import type { StreamGroup } from './checker.js';
import type { LogRecord } from './log-tap.js';
import type { Exchange } from './record.js';
import { bump } from './util.js';

/**
 * A resumed response that broke (network error, cut) after delivering at
 * most its resume acknowledgment (the cursor as its id), and after which the SDK client
 * reconnected *without* `Last-Event-ID`: the client lost its cursor. The
 * acknowledgment carries the cursor precisely so the SDK keeps it (it only keeps ids
 * seen on the current response); if it never reached the SDK, a POST
 * stream is never resumed again (its request waits for its timeout, with no
 * verdict) and the GET stream restarts from the head (events recorded in
 * between never reach the application). Those two are violations; a GET
 * restart that happened to skip nothing is only counted.
 */
export function cursorLosses(
  exchanges: readonly Exchange[],
  groups: ReadonlyMap<string, StreamGroup>,
  log: ReadonlyMap<string, readonly LogRecord[]>,
): { byStream: Map<string, Array<{ kind: string; exchange: Exchange; detail: string }>>; counts: Record<string, number> } {
  const byStream = new Map<string, Array<{ kind: string; exchange: Exchange; detail: string }>>();
  const counts: Record<string, number> = {};
  const byClient = new Map<string, Exchange[]>();
  for (const ex of exchanges) {
    if (ex.clientKind !== 'sdk') continue;
    const list = byClient.get(ex.client) ?? [];
    if (list.length === 0) byClient.set(ex.client, list);
    list.push(ex);
  }
  for (const list of byClient.values()) {
    for (const [i, ex] of list.entries()) {
      if (ex.method !== 'GET' || ex.cursor === undefined || (ex.end !== 'broken' && ex.end !== 'cut') || ex.status !== 200) continue;
      if (!ex.events.every((e) => e.id === ex.cursor && e.ack !== undefined)) continue;
      const cursor = decodeEventId(ex.cursor);
      if (!cursor.ok) continue;
      const ended = ex.endedAt ?? ex.startedAt;
      const next = list.slice(i + 1).find((x) => x.method === 'GET' && x.startedAt >= ended && (x.sessionId ?? '') === (ex.sessionId ?? ''));
      if (next === undefined || next.cursor !== undefined || next.startedAt - ended > 3_000) continue;
      const session = ex.sessionId ?? '';
      const key = `${session}/${cursor.value.stream}`;
      const add = (kind: string, detail: string): void => {
        const list2 = byStream.get(key) ?? [];
        if (list2.length === 0) byStream.set(key, list2);
        list2.push({ kind, exchange: ex, detail });
      };
      if (cursor.value.stream !== '0') {
        const group = groups.get(key);
        const resumedLater = group?.exchanges.some((x) => x.n > ex.n && x.cursor !== undefined) ?? false;
        if (resumedLater) {
          bump(counts, 'post stream, resumed later anyway');
          continue;
        }
        bump(counts, 'post stream never resumed again');
        add('stall_cursor_lost', `the resume from ${ex.cursor} broke ${brokeWhere(ex)} (${ex.end}${ex.error === undefined ? '' : `: ${ex.error.slice(0, 80)}`}); the client's next GET (#${next.n}, ${next.startedAt - ended} ms later) carried no Last-Event-ID and the stream was never resumed again; ${traceAfter(list, ex, group?.exchanges ?? [])}`);
        continue;
      }
      const head = next.events.find((e) => e.id !== undefined)?.id;
      const headSeq = head === undefined ? undefined : decodeEventId(head);
      if (headSeq?.ok !== true) {
        bump(counts, 'get stream, restart not observed');
        continue;
      }
      const skipped = (log.get(key) ?? []).filter((r) => r.kind === 'event' && r.seq > cursor.value.seq && r.seq <= headSeq.value.seq).length;
      if (skipped === 0) {
        bump(counts, 'get stream restarted from the head, nothing skipped');
        continue;
      }
      bump(counts, 'get stream restarted from the head, events skipped');
      add('gap_cursor_lost', `the resume from ${ex.cursor} broke ${brokeWhere(ex)}; the client reopened the GET stream without Last-Event-ID (#${next.n}) at ${head}, skipping ${skipped} logged event(s)`);
    }
  }
  return { byStream, counts };
}

/** Where the resumed response broke: with nothing on it (0 events: the client had no id from it), or after its acknowledgment. */
function brokeWhere(ex: Exchange): string {
  return ex.events.length === 0 ? 'before its acknowledgment (no event on the wire)' : 'after its acknowledgment';
}

/**
 * What the client did after the broken resume, for finding 17 (not yet
 * explained): its next requests in the session (what each was and what it
 * got), and how the stream's own exchanges ended.
 */
function traceAfter(list: readonly Exchange[], ex: Exchange, stream: readonly Exchange[]): string {
  const after = list.filter((x) => x.n > ex.n && (x.sessionId ?? '') === (ex.sessionId ?? '')).slice(0, 6);
  const what = (x: Exchange): string => {
    const first = x.events.find((e) => e.id !== undefined)?.id;
    return `#${x.n} ${x.method}${x.rpc?.method === undefined ? '' : ` ${x.rpc.method}`}${x.cursor === undefined ? '' : ` from ${x.cursor}`} -> ${x.status ?? 'no answer'} ${x.end}, ${x.events.length} events${first === undefined ? '' : ` from ${first}`}`;
  };
  const own = stream.map((x) => `#${x.n} ${x.method} ${x.status ?? '-'} ${x.end}`).join(', ');
  return `next in the session: ${after.map(what).join('; ') || 'nothing'}; the stream's exchanges: ${own || 'none'}`;
}
