import type { InspectAccess } from './access.js';
import type { ChainCheck } from './model.js';
import { readSessionEvents } from './read.js';
import type { RawEvent } from './read.js';
import { resolveTag } from './registry.js';
import type { KnownSession } from './registry.js';

type Problem = ChainCheck['problems'][number];

/**
 * Checks one stream's chain as the readers do, but reports instead of
 * stopping: every event must have seq = last + 1 and prev = last's
 * position (a larger seq is a `hole`; a repeated or smaller seq, or a prev
 * that names another event, a `fork`), carry the session's epoch
 * (`epoch`), have readable headers (`malformed`), and nothing may follow
 * an `end` (`after_end`). The first retained event may start past seq 1
 * (older ones aged out): that is retention, not a hole. Each problem names
 * the position where it was found. Pure: `events` in log order.
 */
export function checkChain(stream: string, events: readonly RawEvent[], epoch: string | undefined): ChainCheck {
  const problems: Problem[] = [];
  let last: { seq: number; pos: number; end: boolean } | undefined;
  for (const e of events) {
    if (e.seq === undefined || e.prev === undefined || e.kind === undefined) {
      problems.push({ kind: 'malformed', seq: e.seq ?? 0, pos: e.pos, detail: 'missing or unreadable Tether-Seq, Tether-Prev or Tether-Kind' });
      continue;
    }
    if (epoch !== undefined && e.epoch !== epoch) {
      problems.push({ kind: 'epoch', seq: e.seq, pos: e.pos, detail: `epoch ${String(e.epoch)}, the session's is ${epoch}` });
    }
    if (last !== undefined) {
      if (last.end) problems.push({ kind: 'after_end', seq: e.seq, pos: e.pos, detail: `event after the stream's end at seq ${last.seq} (pos ${last.pos})` });
      if (e.seq > last.seq + 1) {
        problems.push({ kind: 'hole', seq: e.seq, pos: e.pos, detail: `expected seq ${last.seq + 1} after seq ${last.seq} (pos ${last.pos}), found seq ${e.seq}: ${e.seq - last.seq - 1} missing` });
      } else if (e.seq <= last.seq) {
        problems.push({ kind: 'fork', seq: e.seq, pos: e.pos, detail: `seq ${e.seq} again after seq ${last.seq} (pos ${last.pos}): two events claim one place` });
      } else if (e.prev !== last.pos) {
        problems.push({ kind: 'fork', seq: e.seq, pos: e.pos, detail: `prev ${e.prev}, expected ${last.pos} (the position of seq ${last.seq})` });
      }
    } else if (e.seq === 1 && e.prev !== 0) {
      problems.push({ kind: 'fork', seq: e.seq, pos: e.pos, detail: `the first event has prev ${e.prev}, expected 0` });
    }
    last = { seq: e.seq, pos: e.pos, end: (last?.end ?? false) || e.kind === 'end' };
  }
  return { stream, ok: problems.length === 0, events: events.length, problems };
}

/** Groups a session's events by stream, GET stream `0` first, then by first position. */
export function byStream(events: readonly RawEvent[]): Map<string, RawEvent[]> {
  const streams = new Map<string, RawEvent[]>();
  const zero = events.filter((e) => e.stream === '0');
  if (zero.length > 0) streams.set('0', zero);
  for (const e of events) {
    if (e.stream === '0') continue;
    const list = streams.get(e.stream) ?? [];
    list.push(e);
    streams.set(e.stream, list);
  }
  return streams;
}

/** Every stream of the session named by `tag`, checked. */
export async function checkChains(access: InspectAccess, tag: string, known?: readonly KnownSession[]): Promise<ChainCheck[]> {
  const session = await resolveTag(access, tag, known);
  const events = await readSessionEvents(access, session.sessionId);
  return [...byStream(events)].map(([stream, list]) => checkChain(stream, list, session.record?.epoch));
}
