import { decodeEventId, encodeEventId, encodeResumeAck, newEpoch, newStreamId } from '@tether/protocol';
import { rpcError, sendJson } from './http-out.js';
import { Backend, MiniMcpServer } from './mini-mcp.js';
import type { ResumeContext, StreamLog, ZooEvent } from './mini-mcp.js';

/**
 * The zoo: one small server per failure of DESIGN §1, each answering HTTP 200,
 * a valid event stream and the same session id, so that only the structure
 * of the ids gives it away. Plus a Tether-like server that resumes correctly
 * or refuses explicitly, with Tether event ids.
 */

/** Runs `then` as soon as `ready()` holds, checking again on every event of `log`. */
function whenTrue(log: StreamLog, ready: () => boolean, then: () => void): void {
  if (ready()) return then();
  const off = log.subscribe(() => {
    if (!ready()) return;
    off();
    then();
  });
}

/** The events of `log` after `cursor`, or undefined when `cursor` is not among them. */
function after(log: StreamLog, cursor: string): ZooEvent[] | undefined {
  const i = log.events.findIndex((e) => e.id === cursor);
  return i === -1 ? undefined : log.events.slice(i + 1);
}

/**
 * Replay from zero after a restart. The server persists every event it sends
 * but keeps its cursor index in memory; dropping a tool stream crashes it
 * (the job dies), and after the restart it rebuilds the session from disk and
 * ignores `Last-Event-ID`: the client gets its history again, from id 1.
 */
export class ReplayAfterRestartServer extends MiniMcpServer {
  constructor() {
    super('zoo-replay-after-restart');
  }

  protected override record(sessionId: string, log: StreamLog, data: string): ZooEvent {
    const e = super.record(sessionId, log, data);
    let disk = this.backend.disk.get(sessionId);
    if (disk === undefined) this.backend.disk.set(sessionId, (disk = []));
    disk.push(e);
    return e;
  }

  protected override onCut(): void {
    void this.restart();
  }

  protected resume({ sessionId, cursor, openSse }: ResumeContext): void {
    const log = this.streamOf(sessionId, cursor);
    const rest = log === undefined ? undefined : after(log, cursor);
    if (log !== undefined && rest !== undefined) return openSse().serve(rest, log);
    openSse().serve(this.backend.disk.get(sessionId) ?? [], undefined);
  }
}

/**
 * Gap-skipping resume after eviction. A stream keeps only its last
 * `capacity` events; when the cursor was evicted it resumes from the oldest
 * event it still holds, skipping the rest.
 */
export class GapAfterEvictionServer extends MiniMcpServer {
  readonly capacity = 2;

  constructor() {
    super('zoo-gap-after-eviction');
  }

  protected override record(sessionId: string, log: StreamLog, data: string): ZooEvent {
    const e = super.record(sessionId, log, data);
    if (log.events.length > this.capacity) log.events.splice(0, log.events.length - this.capacity);
    return e;
  }

  protected resume({ sessionId, cursor, openSse }: ResumeContext): void {
    const log = this.streamOf(sessionId, cursor);
    if (log === undefined) return openSse().end();
    // Answer once the event after the cursor has been evicted, so the
    // failure does not depend on how fast the client came back.
    const evicted = () => log.done || Number(log.events[0]?.id) > Number(cursor) + 1;
    whenTrue(log, evicted, () => openSse().serve(after(log, cursor) ?? log.events, log));
  }
}

/**
 * Buffer/log seam gap. Events reach the durable log `lag` events late; the
 * send buffer keeps the last `buffered`. A resume replays the log after the
 * cursor, then drains the buffer, whose head has moved past events that are
 * not in the log yet: the ids look monotonic and then jump.
 */
export class SeamGapServer extends MiniMcpServer {
  readonly lag = 5;
  readonly buffered = 2;
  readonly #produced = new Map<string, ZooEvent[]>();
  readonly #durable = new Map<string, ZooEvent[]>();

  constructor() {
    super('zoo-seam-gap');
  }

  protected override record(sessionId: string, log: StreamLog, data: string): ZooEvent {
    const e = super.record(sessionId, log, data);
    const produced = this.#list(this.#produced, log.key);
    const durable = this.#list(this.#durable, log.key);
    produced.push(e);
    while (durable.length < produced.length - this.lag) durable.push(produced[durable.length] as ZooEvent);
    if (log.events.length > this.buffered) log.events.splice(0, log.events.length - this.buffered);
    return e;
  }

  protected resume({ sessionId, cursor, openSse }: ResumeContext): void {
    const log = this.streamOf(sessionId, cursor);
    if (log === undefined) return openSse().end();
    const durable = this.#list(this.#durable, log.key);
    // Answer once the log holds two events past the cursor (and so the
    // buffer's head is `lag` events further): the seam does not depend on
    // how fast the client came back.
    const logged = () => log.done || durable.some((e) => Number(e.id) >= Number(cursor) + 2);
    whenTrue(log, logged, () => {
      const i = durable.findIndex((e) => e.id === cursor);
      const fromLog = i === -1 ? [] : durable.slice(i + 1);
      const lastLogged = Number(fromLog.at(-1)?.id ?? cursor);
      const fromBuffer = log.events.filter((e) => Number(e.id) > lastLogged);
      openSse().serve([...fromLog, ...fromBuffer], log);
    });
  }

  #list(map: Map<string, ZooEvent[]>, key: string): ZooEvent[] {
    let l = map.get(key);
    if (l === undefined) map.set(key, (l = []));
    return l;
  }
}

/**
 * Lazy fork on a second process. Sessions and job output are shared (think
 * of a shared job queue), event logs are per process. A resume that lands on
 * the process without the stream's log lazily creates an empty one, numbers
 * from 1, and follows whatever the session produces from now on.
 */
export class LazyForkServer extends MiniMcpServer {
  protected resume({ sessionId, cursor, openSse }: ResumeContext): void {
    const log = this.streamOf(sessionId, cursor);
    const rest = log === undefined ? undefined : after(log, cursor);
    if (log !== undefined && rest !== undefined) return openSse().serve(rest, log);
    const lazy = this.openLog();
    const out = openSse();
    out.write(this.record(sessionId, lazy, ''), this.retryMs);
    this.follow(sessionId, lazy, undefined);
    out.serve([], lazy);
  }
}

/** Two lazy-fork processes sharing sessions and job output. */
export async function startLazyForkPair(): Promise<[LazyForkServer, LazyForkServer]> {
  const backend = new Backend();
  const a = await new LazyForkServer('zoo-lazy-fork-a', backend).start();
  const b = await new LazyForkServer('zoo-lazy-fork-b', backend).start();
  return [a, b];
}

/**
 * Silent fallback to id-less SSE. Answers are JSON until a tool streams; the
 * stream has ids (numbered per stream, so not unique in the session), but a
 * resume falls back to SSE without `id:` fields and replays the whole queue.
 */
export class SilentFallbackServer extends MiniMcpServer {
  constructor() {
    super('zoo-silent-fallback');
    this.idScheme = 'stream';
  }

  protected resume({ sessionId, cursor, openSse }: ResumeContext): void {
    const log = this.streamOf(sessionId, cursor);
    const out = openSse();
    if (log === undefined) return out.end();
    out.serve(
      log.events.map((e) => ({ id: undefined, data: e.data })),
      undefined,
    );
  }
}

/** How a `TetherLikeServer` answers a resume it could serve. */
export type TetherLikeMode =
  /** Tether's contract: the resume acknowledgment (`event: resume`), then the events after the cursor. */
  | 'correct'
  /** Every resume refused `truncated`, as if retention had evicted the events after the cursor. */
  | 'refuse'
  /** What Tether gateways sent before the acknowledgment: the cursor's id again, with empty data. */
  | 'echo'
  /** An acknowledgment whose data lacks `next_seq`. */
  | 'malformed_ack';

/**
 * Tether's contract, in small: Tether event ids, `Tether-Resume` on every
 * resume answer, a resume acknowledgment opening every served resume, 400
 * for a malformed cursor, 404 with the verdict for one it cannot honour.
 * The other modes break one part of it (`TetherLikeMode`).
 */
export class TetherLikeServer extends MiniMcpServer {
  readonly mode: TetherLikeMode;
  readonly #epochs = new Map<string, string>();
  readonly #streamIds = new Map<string, string>();
  #pos = 0;

  constructor(mode: TetherLikeMode) {
    super(`zoo-tether-like-${mode}`);
    this.mode = mode;
  }

  protected override record(sessionId: string, log: StreamLog, data: string): ZooEvent {
    let epoch = this.#epochs.get(sessionId);
    if (epoch === undefined) this.#epochs.set(sessionId, (epoch = newEpoch()));
    let stream = this.#streamIds.get(log.key);
    if (stream === undefined) this.#streamIds.set(log.key, (stream = newStreamId()));
    const e = { id: encodeEventId({ epoch, stream, seq: log.events.length + 1, pos: ++this.#pos }), data };
    this.proc.streamOfId.set(`${sessionId}\n${e.id}`, log.key);
    log.append(e);
    return e;
  }

  protected resume({ sessionId, cursor, res, openSse }: ResumeContext): void {
    const refuse = (status: number, verdict: string, message: string): void =>
      sendJson(res, status, rpcError(null, -32001, message, { verdict, lastEventId: cursor }), undefined, { 'tether-resume': verdict });
    const decoded = decodeEventId(cursor);
    if (!decoded.ok) return refuse(400, 'malformed', `Last-Event-ID is malformed: ${decoded.reason}`);
    if (decoded.value.epoch !== this.#epochs.get(sessionId)) return refuse(404, 'epoch_mismatch', 'the cursor belongs to another log');
    const log = this.streamOf(sessionId, cursor);
    if (log === undefined) return refuse(404, 'ahead', 'the log does not hold this event');
    if (this.mode === 'refuse') return refuse(404, 'truncated', 'events after the cursor were evicted');
    res.setHeader('tether-resume', 'resumed');
    const out = openSse();
    const { stream, seq } = decoded.value;
    if (this.mode === 'correct') out.frame(encodeResumeAck({ cursor, stream, nextSeq: seq + 1, retryMs: this.retryMs }));
    if (this.mode === 'echo') out.write({ id: cursor, data: '' }, this.retryMs);
    if (this.mode === 'malformed_ack') out.frame(`id: ${cursor}\nevent: resume\ndata: {"verdict":"resumed","stream":"${stream}"}\n\n`);
    out.serve(after(log, cursor) ?? [], log);
  }
}
