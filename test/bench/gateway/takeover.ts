/**
 * Figure 5: takeover after SIGKILL of the writer (DESIGN section 12: from the
 * kill to the next event at a resuming client, p50 ≤ 300 ms, p99 ≤ 1 s).
 *
 * Two gateway processes on one nats-server and one resumable upstream (the
 * official-SDK upstream with its event store, so a taker's nested resume
 * works). Each round: a fresh writer W (a new process on a new port, a new
 * instance id); a raw node:http client, so no SDK reconnection backoff,
 * initializes a session on W and calls `stream_progress` (one event every
 * `eventIntervalMs`, longer than the round can last); after `killAfter`
 * events the client SIGKILLs W by its pid, at once resumes on R with
 * `Last-Event-ID` = the last event it got, and times the kill to the next
 * *new* event (frames with empty data, such as the resume's priming echo of
 * the cursor, and `event: resume` acknowledgments are not events). The round
 * ends at the 20th new event, an explicit end, or `roundTimeoutMs` after the
 * kill.
 *
 * Events are appended before any client sees them, so the first new event
 * can be one that W had appended just before it died, already in the log:
 * that one needs no takeover. So each round also looks up, by the `pos` in
 * the event ids, when the log stored each new event (JetStream's own
 * timestamp, same machine clock), and also times the first new event stored
 * after the kill: that one came through the new writer.
 *
 * The kill point varies from round to round (seeded), so the kill lands at
 * every phase of whatever periodic work the writer does (a lease renewed every
 * third of its TTL today).
 */
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { decodeEventId, HttpHeader, SseParser } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import { cpuMs, machineCpuMs } from './cpu.js';
import { createEndpoint, initialize, PROTOCOL_VERSION } from './raw-mcp.js';
import type { BenchStack, GatewayProcess } from './stack.js';
import { summarize95 } from './summary.js';
import type { Summary95 } from './summary.js';

const GATEWAY_CONFIG_TS = fileURLToPath(new URL('../../../services/gateway/src/config.ts', import.meta.url));
/** New events recorded per round after the first (enough to find the first one stored after the kill). */
const NEW_EVENTS_PER_ROUND = 20;

export const TakeoverOutcome = {
  /** A new event arrived on the resumed stream: the stream continued. */
  continued: 'continued',
  /** The resume was refused with a verdict, or the stream ended (or sent a JSON-RPC error) before any new event. */
  ended: 'ended',
  /** Nothing new within the round's cap. */
  timeout: 'timeout',
  /** The benchmark could not run the round (start, initialize or call failed before the kill). */
  failed: 'failed',
} as const;
export type TakeoverOutcome = (typeof TakeoverOutcome)[keyof typeof TakeoverOutcome];

export interface TakeoverRound {
  readonly round: number;
  readonly writer: string;
  readonly outcome: TakeoverOutcome;
  /** What the resume said: `resumed`, a refusal's verdict, `stream ended`, `json-rpc error …`, or what failed. */
  readonly verdict: string;
  /** Events the client had from W when it killed W. */
  readonly killedAfterEvents: number;
  /** ms from the kill to the resume's HTTP answer, and to its acknowledgment frame (priming echo or `event: resume`). */
  readonly answeredMs: number;
  readonly ackMs: number;
  /** ms from the kill to the next new event at the client (NaN unless continued). */
  readonly toNextEventMs: number;
  /** ms from the kill to the first new event the log stored after the kill (NaN if none of the new events was). */
  readonly toFirstAfterKillMs: number;
  /** New events the client got that the log had stored before the kill (W's last appends, not yet delivered). */
  readonly storedBeforeKill: number;
  /** Events delivered again that the client already had (a replay; should be 0). */
  readonly duplicates: number;
  readonly newEvents: number;
}

export interface TakeoverResult {
  /** The gateway's `--lease-ttl` default as config.ts spells it (e.g. `10s`); null when there is no such flag (kept in the JSON). */
  readonly leaseTtl: string | null;
  readonly rounds: readonly TakeoverRound[];
  readonly roundTimeoutMs: number;
  readonly eventIntervalMs: number;
  /** Over continued rounds. */
  readonly toNextEventMs: Summary95;
  readonly toFirstAfterKillMs: Summary95;
  readonly outcomes: Record<TakeoverOutcome, number>;
  /** Cores used by everything else (not R, the upstream, nats-server, this process) while rounds waited for the takeover. */
  readonly otherCores: number;
}

export interface TakeoverOptions {
  readonly stack: BenchStack;
  readonly rounds: number;
  readonly roundTimeoutMs: number;
  readonly eventIntervalMs: number;
  /** Kill after this many events, drawn per round (inclusive). */
  readonly killAfter: { readonly min: number; readonly max: number };
  readonly nodeArgs: readonly string[];
  readonly seed: number;
  readonly onRound?: (round: TakeoverRound) => void;
}

/** A flag's default from the gateway's config.ts (`{ flag: 'lease-ttl', …, fallback: '10s' }`); undefined when the flag is gone. */
function flagDefault(source: string, flag: string): string | undefined {
  return new RegExp(`\\{\\s*flag:\\s*'${flag}'[^}]*?fallback:\\s*'([^']*)'`).exec(source)?.[1];
}

export async function measureTakeover(options: TakeoverOptions): Promise<TakeoverResult> {
  const { stack } = options;
  const configSource = await readFile(GATEWAY_CONFIG_TS, 'utf8');
  const leaseTtl = flagDefault(configSource, 'lease-ttl');
  const logStream = flagDefault(configSource, 'log-stream') ?? 'TETHER_LOG';
  const started: GatewayProcess[] = [];
  // Exited (and reaped) pids: never signalled again, their numbers may be reused.
  const exited = new Set<number>();
  const startGateway = async (name: string): Promise<GatewayProcess> => {
    const gw = await stack.startGateway({ name, nodeArgs: options.nodeArgs });
    started.push(gw);
    void gw.process.exited.then(() => exited.add(gw.pid));
    return gw;
  };
  const nc = await connect({ servers: stack.nats.url });
  const rounds: TakeoverRound[] = [];
  const busy = { otherMs: 0, wallMs: 0 };
  try {
    const jsm = await jetstreamManager(nc);
    const storedAtMs = async (eventId: string): Promise<number> => {
      const decoded = decodeEventId(eventId);
      if (!decoded.ok) return Number.NaN;
      const stored = await jsm.streams.getMessage(logStream, { seq: decoded.value.pos }).catch(() => null);
      return stored === null ? Number.NaN : timestampMs(stored.timestamp);
    };
    const reader = await startGateway('gw-takeover-r');
    const steady = { reader: reader.pid, upstream: stack.sseUpstream.process.pid, 'nats-server': stack.nats.pid ?? process.pid, bench: process.pid };
    const random = mulberry32(options.seed);
    // Longer than a round can last, so the upstream is still streaming when the taker asks it to resume.
    const count = Math.ceil((options.roundTimeoutMs + options.killAfter.max * options.eventIntervalMs + 10_000) / options.eventIntervalMs);
    for (let round = 1; round <= options.rounds; round += 1) {
      const killAfter = options.killAfter.min + Math.floor(random() * (options.killAfter.max - options.killAfter.min + 1));
      const name = `gw-takeover-w${round}-${Date.now().toString(36)}`;
      const result = await runRound({ round, name, killAfter, count, reader, startGateway, storedAtMs, steady, busy, options }).catch(
        (err: unknown): TakeoverRound => ({
          round,
          writer: name,
          outcome: TakeoverOutcome.failed,
          verdict: String((err as Error).message ?? err),
          killedAfterEvents: 0,
          answeredMs: Number.NaN,
          ackMs: Number.NaN,
          toNextEventMs: Number.NaN,
          toFirstAfterKillMs: Number.NaN,
          storedBeforeKill: 0,
          duplicates: 0,
          newEvents: 0,
        }),
      );
      rounds.push(result);
      options.onRound?.(result);
    }
  } finally {
    // Every gateway we started, by pid, whatever happened above.
    await Promise.all(started.map((gw) => stopByPid(gw, exited)));
    await nc.close().catch(() => undefined);
  }
  const continued = rounds.filter((r) => r.outcome === TakeoverOutcome.continued);
  const outcomes = Object.fromEntries(Object.values(TakeoverOutcome).map((o) => [o, rounds.filter((r) => r.outcome === o).length])) as Record<TakeoverOutcome, number>;
  return {
    leaseTtl: leaseTtl ?? null,
    rounds,
    roundTimeoutMs: options.roundTimeoutMs,
    eventIntervalMs: options.eventIntervalMs,
    toNextEventMs: summarize95(continued.map((r) => r.toNextEventMs)),
    toFirstAfterKillMs: summarize95(continued.map((r) => r.toFirstAfterKillMs).filter((x) => Number.isFinite(x))),
    outcomes,
    otherCores: busy.wallMs > 0 ? busy.otherMs / busy.wallMs : Number.NaN,
  };
}

interface RoundContext {
  readonly round: number;
  readonly name: string;
  readonly killAfter: number;
  readonly count: number;
  readonly reader: GatewayProcess;
  readonly startGateway: (name: string) => Promise<GatewayProcess>;
  readonly storedAtMs: (eventId: string) => Promise<number>;
  readonly steady: Record<string, number>;
  readonly busy: { otherMs: number; wallMs: number };
  readonly options: TakeoverOptions;
}

interface Arrival {
  readonly id: string;
  readonly at: number;
}

async function runRound(c: RoundContext): Promise<TakeoverRound> {
  const writer = await c.startGateway(c.name);
  try {
    return await killAndResume(c, writer);
  } finally {
    // SIGKILL through the child we started (by its pid); a no-op once it exited.
    await writer.process.kill();
  }
}

async function killAndResume(c: RoundContext, writer: GatewayProcess): Promise<TakeoverRound> {
  const ep = createEndpoint(`${writer.origin}/mcp`);
  let sessionId: string;
  try {
    sessionId = await initialize(ep);
  } finally {
    ep.agent.destroy();
  }
  const seen = new Set<string>();
  let lastId: string | undefined;
  let events = 0;
  let killedAt = Number.NaN;
  let killedAtWallMs = Number.NaN;
  let cpuAtKill: Promise<number[]> | undefined;
  const snapshot = async (): Promise<number[]> => [(await machineCpuMs()).busy, ...(await Promise.all(Object.values(c.steady).map((pid) => cpuMs(pid))))];

  // Resolves with the cursor once W is dead.
  const killed = new Promise<string>((resolve, reject) => {
    const call = openSse(
      `${writer.origin}/mcp`,
      'POST',
      { accept: 'application/json, text/event-stream', 'content-type': 'application/json', [HttpHeader.sessionId]: sessionId },
      JSON.stringify({
        jsonrpc: '2.0',
        id: `takeover-${c.round}`,
        method: 'tools/call',
        params: { name: 'stream_progress', arguments: { count: c.count, delayMs: c.options.eventIntervalMs }, _meta: { progressToken: `t${c.round}` } },
      }),
      (msg) => {
        if (!isEvent(msg) || msg.id === undefined || !Number.isNaN(killedAt)) return;
        seen.add(msg.id);
        lastId = msg.id;
        events += 1;
        if (events < c.killAfter) return;
        // In the same tick as the event: nothing else runs between the last event and the kill.
        killedAt = performance.now();
        killedAtWallMs = performance.timeOrigin + killedAt;
        process.kill(writer.pid, 'SIGKILL');
        call.destroy();
        resolve(lastId);
      },
    );
    call.closed.then(() => {
      if (Number.isNaN(killedAt)) reject(new Error(`the stream on ${c.name} ended after ${events} events, before the kill`));
    }, reject);
  });
  const cursor = await withTimeout(killed, 30_000, `no ${c.killAfter} events from ${c.name} within 30 s`);

  let answeredAt = Number.NaN;
  let ackAt = Number.NaN;
  let verdict = 'resumed';
  // Set from the stream's callbacks too, so not narrowed here.
  let outcome = TakeoverOutcome.timeout as TakeoverOutcome;
  let duplicates = 0;
  const arrivals: Arrival[] = [];
  let firstNewAt = Number.NaN;
  let cpuAtFirst: Promise<number[]> | undefined;
  const resume = openSse(
    `${c.reader.origin}/mcp`,
    'GET',
    { accept: 'text/event-stream', [HttpHeader.sessionId]: sessionId, [HttpHeader.lastEventId]: cursor },
    undefined,
    (msg) => {
      if (!isEvent(msg)) {
        if (Number.isNaN(ackAt)) ackAt = performance.now();
        return;
      }
      if (msg.id !== undefined && seen.has(msg.id)) {
        duplicates += 1;
        return;
      }
      const at = performance.now();
      if (Number.isNaN(firstNewAt)) {
        firstNewAt = at;
        cpuAtFirst = snapshot();
        const error = jsonRpcError(msg.data);
        outcome = error === undefined ? TakeoverOutcome.continued : TakeoverOutcome.ended;
        if (error !== undefined) verdict = `json-rpc error ${error}`;
      }
      if (msg.id !== undefined) arrivals.push({ id: msg.id, at });
      if (arrivals.length > NEW_EVENTS_PER_ROUND || outcome === TakeoverOutcome.ended) resume.destroy();
    },
  );
  cpuAtKill = snapshot();
  try {
    const answer = await withTimeout(resume.response, c.options.roundTimeoutMs, 'no answer');
    answeredAt = performance.now();
    if (answer.statusCode !== 200) {
      outcome = TakeoverOutcome.ended;
      verdict = `${answer.statusCode ?? 0} ${String(answer.headers[HttpHeader.tetherResume] ?? '')}`.trim();
      resume.destroy();
    }
    const remaining = c.options.roundTimeoutMs - (performance.now() - killedAt);
    await withTimeout(resume.closed, Math.max(0, remaining), 'timeout').then(
      () => {
        if (Number.isNaN(firstNewAt) && outcome === TakeoverOutcome.timeout) {
          outcome = TakeoverOutcome.ended;
          verdict = 'stream ended before a new event';
        }
      },
      () => undefined,
    );
  } catch {
    // No answer at all within the cap: a timeout.
  } finally {
    resume.destroy();
  }
  if (outcome === TakeoverOutcome.timeout) {
    verdict = Number.isNaN(answeredAt) ? 'no answer' : 'nothing new';
    cpuAtFirst = snapshot();
  }
  const [before, after] = await Promise.all([cpuAtKill, cpuAtFirst ?? cpuAtKill]);
  const endAt = Number.isNaN(firstNewAt) ? performance.now() : firstNewAt;
  const ours = after.slice(1).reduce((sum, x, i) => sum + x - (before[i + 1] ?? 0), 0);
  c.busy.otherMs += Math.max(0, (after[0] ?? 0) - (before[0] ?? 0) - ours);
  c.busy.wallMs += endAt - killedAt;

  // Before the DELETE, which purges the session's log.
  const stored = await Promise.all(arrivals.map((a) => c.storedAtMs(a.id)));
  // The end of the round: the session goes (the upstream stops streaming), W is reaped.
  await deleteSession(`${c.reader.origin}/mcp`, sessionId).catch(() => undefined);
  await withTimeout(writer.process.exited, 10_000, 'writer did not exit').catch(() => undefined);
  const afterKill = arrivals.findIndex((_, i) => (stored[i] ?? Number.NaN) > killedAtWallMs);
  return {
    round: c.round,
    writer: c.name,
    outcome,
    verdict,
    killedAfterEvents: events,
    answeredMs: answeredAt - killedAt,
    ackMs: ackAt - killedAt,
    toNextEventMs: outcome === TakeoverOutcome.continued ? firstNewAt - killedAt : Number.NaN,
    toFirstAfterKillMs: afterKill === -1 ? Number.NaN : arrivals[afterKill]!.at - killedAt,
    storedBeforeKill: stored.filter((t) => t <= killedAtWallMs).length,
    duplicates,
    newEvents: arrivals.length,
  };
}

/** SIGTERM by pid (a live gateway drains and exits, writing a --cpu-prof profile), SIGKILL by pid after 5 s; a no-op for one already dead. */
async function stopByPid(gw: GatewayProcess, exited: ReadonlySet<number>): Promise<void> {
  const signal = (name: NodeJS.Signals): void => {
    if (exited.has(gw.pid)) return;
    try {
      process.kill(gw.pid, name);
    } catch {
      // already gone
    }
  };
  if (exited.has(gw.pid)) return;
  signal('SIGTERM');
  const timer = setTimeout(() => signal('SIGKILL'), 5_000);
  await gw.process.exited;
  clearTimeout(timer);
}

/** A message event with data: not a priming frame (empty data), not a resume acknowledgment, not a comment. */
function isEvent(msg: SseMessage): boolean {
  return msg.hasData && msg.data !== '' && msg.event !== 'resume';
}

/** `code: message` when `data` is a JSON-RPC error response. */
function jsonRpcError(data: string): string | undefined {
  try {
    const value = JSON.parse(data) as { error?: { code?: unknown; message?: unknown } };
    return value.error === undefined ? undefined : `${String(value.error.code)}: ${String(value.error.message)}`;
  } catch {
    return undefined;
  }
}

interface SseRequest {
  readonly response: Promise<IncomingMessage>;
  /** Resolves when the response ends or the request is destroyed; rejects when it could not be sent. */
  readonly closed: Promise<void>;
  destroy(): void;
}

/**
 * One request on its own connection (no agent: a dead gateway's socket is
 * never reused), its SSE body handed to `onMessage` block by block, in the
 * tick each block is parsed.
 */
function openSse(url: string, method: string, headers: Record<string, string>, body: string | undefined, onMessage: (msg: SseMessage) => void): SseRequest {
  const target = new URL(url);
  let req: ClientRequest;
  let settle: { resolve: () => void; reject: (err: Error) => void } | undefined;
  const closed = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  closed.catch(() => undefined);
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    req = request({ host: target.hostname, port: target.port, path: target.pathname, method, headers: { [HttpHeader.protocolVersion]: PROTOCOL_VERSION, ...headers }, agent: false }, (res) => {
      resolve(res);
      const parser = new SseParser();
      res.on('data', (chunk: Buffer) => {
        try {
          for (const msg of parser.push(chunk)) onMessage(msg);
        } catch {
          req.destroy();
        }
      });
      res.on('error', () => undefined);
      res.once('close', () => settle?.resolve());
    });
    req.on('error', (err) => {
      reject(err);
      settle?.reject(err);
    });
    req.on('close', () => settle?.resolve());
    req.end(body);
  });
  response.catch(() => undefined);
  return { response, closed, destroy: () => req.destroy() };
}

function deleteSession(url: string, sessionId: string): Promise<number> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: target.hostname, port: target.port, path: target.pathname, method: 'DELETE', headers: { [HttpHeader.sessionId]: sessionId, [HttpHeader.protocolVersion]: PROTOCOL_VERSION }, agent: false },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('DELETE timed out')));
    req.on('error', reject);
    req.end();
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what)), ms)))]).finally(() => clearTimeout(timer));
}

/** JetStream's RFC 3339 timestamp with nanoseconds, as ms since the epoch (sub-ms kept). */
function timestampMs(ts: string): number {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(ts);
  if (m === null) return Date.parse(ts);
  return Date.parse(`${m[1]}${m[3]}`) + Number(`0.${m[2] ?? '0'}`) * 1000;
}

/** A small seeded PRNG, so runs draw the same kill points. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
