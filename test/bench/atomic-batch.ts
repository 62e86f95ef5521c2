/**
 * Append throughput of one session stream under the three ways a writer
 * could publish, on each `sync_interval` setting (docs/design.md, "Atomic
 * batch publish: measured, not used"; docs/reliability.md, "What an
 * acknowledgement means"):
 *
 * - `seq`: one publish-with-ack at a time, each fenced by
 *   expected-last-subject-sequence: what `StreamWriter` does today.
 * - `pipe<w>`: `w` such publishes in flight. Each carries the position its
 *   predecessor *will* get: only knowable here, where this writer is alone
 *   on the stream (in Tether every session shares TETHER_LOG).
 * - `batch<k>`: atomic batches of `k` (`Nats-Batch-*`, 2.12+), the `k - 1`
 *   staged messages sent without a reply and the commit as a request (one
 *   round trip per batch; nats.js `js.startBatch` also waits for the first).
 *   Only the first message may carry expected-last-subject-sequence (the
 *   server refuses it on a subject already written in the batch); the
 *   `Tether-Prev` of the others is predicted as above.
 *
 * - `lanes64`: 64 writers at once, each with `seq`'s pattern on its own
 *   subject (64 sessions recording into the one stream).
 *
 * Every message carries Tether's headers, a msg id and a ~300-byte payload;
 * the stream is Tether's shape (file, republish, duplicate window,
 * `allow_atomic`). Run it alone:
 *
 *   flock /tmp/tether-bench.lock npx tsx test/bench/atomic-batch.ts [--events 2048] [--rounds 3] [--sync default,always] [--replicas 1,3] [--probe] [--chunks]
 *
 * `--only seq,batch64` runs some patterns; `--url nats://…` measures a
 * server you started (`--replicas 1`; its `sync_interval` is what its config says).
 *
 * `--probe` prints what the server does with batch edge cases (expected
 * sequence on a later message, visibility before the commit, a repeated
 * batch, a stream without `allow_atomic`). `--chunks` records an SDK
 * upstream's burst with the pump's pattern and prints how many SSE events
 * each body chunk held (`--delay-ms` paces the upstream). `NATS_SERVER_BIN` picks the server; default
 * `scripts/nats-server.sh current` (the test kit refuses one older than 2.11).
 */
import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager, StreamConfig } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { LogHeader, newEpoch, SseParser } from '@tether/protocol';
import { findNatsServerBinary, natsServerVersion, startMcpUpstream, startNatsCluster, startNatsServer } from '@tether/testing';
import { median } from './stats.js';

const STREAM = 'BENCH_BATCH';
const PAYLOAD = new TextEncoder().encode(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'bench', progress: 1, total: 100, message: 'x'.repeat(200) } }));

const args = process.argv.slice(2);
const flag = (name: string): boolean => args.includes(`--${name}`);
const option = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const EVENTS = Number(option('events', '2048'));
const ROUNDS = Number(option('rounds', '3'));
const SYNCS = option('sync', 'default,always').split(',');
const bin = findNatsServerBinary();

/** One writer's view of its stream: the last event's seq and position, and the position its next message will get. */
interface Chain {
  readonly subject: string;
  readonly session: string;
  readonly epoch: string;
  seq: number;
  pos: number;
  /** Alone on the stream, this writer's next message is stored here (the stream's last sequence + 1). */
  next: number;
}

function tetherHeaders(chain: Chain, seq: number, prev: number): MsgHdrs {
  const h = headers();
  h.set(LogHeader.epoch, chain.epoch);
  h.set(LogHeader.seq, String(seq));
  h.set(LogHeader.prev, String(prev));
  h.set(LogHeader.kind, 'event');
  h.set(LogHeader.upstreamId, `up-${seq}`);
  h.set(LogHeader.traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
  return h;
}

async function freshChain(jsm: JetStreamManager, stream = STREAM, prefix = 'bench'): Promise<Chain> {
  const session = randomBytes(16).toString('base64url').slice(0, 22);
  const { state } = await jsm.streams.info(stream);
  return { subject: `${prefix}.log.${session}.0`, session, epoch: newEpoch(), seq: 0, pos: 0, next: state.last_seq + 1 };
}

type Pattern = (js: JetStreamClient, nc: NatsConnection, chain: Chain, n: number) => Promise<void>;

const sequential: Pattern = async (js, _nc, chain, n) => {
  for (let i = 0; i < n; i += 1) {
    const seq = chain.seq + 1;
    const ack = await js.publish(chain.subject, PAYLOAD, { headers: tetherHeaders(chain, seq, chain.pos), msgID: `${chain.session}.0.${seq}`, expect: { lastSubjectSequence: chain.pos } });
    chain.seq = seq;
    chain.pos = ack.seq;
    chain.next = ack.seq + 1;
  }
};

function pipelined(window: number): Pattern {
  return async (js, _nc, chain, n) => {
    const inFlight = new Set<Promise<void>>();
    const at = (i: number): number => chain.next + i - 1;
    for (let i = 1; i <= n; i += 1) {
      const seq = chain.seq + i;
      const prev = i === 1 ? chain.pos : at(i - 1);
      const p = js.publish(chain.subject, PAYLOAD, { headers: tetherHeaders(chain, seq, prev), msgID: `${chain.session}.0.${seq}`, expect: { lastSubjectSequence: prev } }).then((ack) => {
        if (ack.seq !== at(i)) throw new Error(`pipelined append ${seq} stored at ${ack.seq}, predicted ${at(i)}`);
      });
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p)).catch(() => undefined);
      if (inFlight.size >= window) {
        try {
          await Promise.race(inFlight);
        } catch (err) {
          // Let the rest land (or fail) before the next run reads the stream's end.
          await Promise.allSettled(inFlight);
          throw err;
        }
      }
    }
    const settled = await Promise.allSettled(inFlight);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
    chain.seq += n;
    chain.pos = at(n);
    chain.next = at(n) + 1;
  };
}

function batched(k: number): Pattern {
  return async (_js, nc, chain, n) => {
    for (let done = 0; done < n; done += k) {
      const size = Math.min(k, n - done);
      const id = randomBytes(12).toString('base64url');
      const at = (j: number): number => chain.next + j - 1;
      let reply: Promise<{ data: Uint8Array }> | undefined;
      for (let j = 1; j <= size; j += 1) {
        const seq = chain.seq + j;
        const h = tetherHeaders(chain, seq, j === 1 ? chain.pos : at(j - 1));
        h.set('Nats-Msg-Id', `${chain.session}.0.${seq}`);
        h.set('Nats-Batch-Id', id);
        h.set('Nats-Batch-Sequence', String(j));
        if (j === 1) h.set('Nats-Expected-Last-Subject-Sequence', String(chain.pos));
        if (j < size) {
          nc.publish(chain.subject, PAYLOAD, { headers: h });
        } else {
          h.set('Nats-Batch-Commit', '1');
          reply = nc.request(chain.subject, PAYLOAD, { headers: h, timeout: 10_000 });
        }
      }
      const ack = JSON.parse(new TextDecoder().decode((await reply!).data)) as { seq?: number; count?: number; error?: { description: string } };
      if (ack.error !== undefined || ack.seq !== at(size) || ack.count !== size) throw new Error(`batch of ${size} answered ${JSON.stringify(ack)}, predicted seq ${at(size)}`);
      chain.seq += size;
      chain.pos = ack.seq;
      chain.next = ack.seq + 1;
    }
  };
}

/** `lanes` writers at once, each on its own subject, each with `seq`'s pattern: many sessions recording at once. */
function lanes(count: number): Pattern {
  return async (js, nc, chain, n) => {
    const per = Math.ceil(n / count);
    await Promise.all(
      Array.from({ length: count }, (_, i) => {
        const session = `${chain.session.slice(0, 18)}${String(i).padStart(4, '0')}`;
        return sequential(js, nc, { subject: `bench.log.${session}.0`, session, epoch: chain.epoch, seq: 0, pos: 0, next: 0 }, per);
      }),
    );
  };
}

const ONLY = option('only', '');
const PATTERNS: ReadonlyArray<readonly [string, Pattern]> = ([
  ['seq', sequential],
  ['lanes64', lanes(64)],
  ['pipe4', pipelined(4)],
  ['pipe16', pipelined(16)],
  ['pipe64', pipelined(64)],
  ['batch4', batched(4)],
  ['batch16', batched(16)],
  ['batch64', batched(64)],
] as const).filter(([name]) => ONLY === '' || ONLY.split(',').includes(name));

function streamConfig(replicas: number, atomic: boolean): Partial<StreamConfig> & { name: string } {
  return {
    name: STREAM,
    subjects: ['bench.log.>'],
    storage: StorageType.File,
    num_replicas: replicas,
    duplicate_window: 120_000_000_000,
    allow_direct: true,
    republish: { src: 'bench.log.>', dest: 'bench.live.>' },
    ...(atomic ? { allow_atomic: true } : {}),
  };
}

interface Target {
  readonly url: string;
  readonly version: string;
  cleanup(): Promise<void>;
}

async function startTarget(sync: string, replicas: number): Promise<Target> {
  const url = option('url', '');
  if (url !== '') return { url, version: `at ${url}`, cleanup: async () => undefined };
  const configLines = sync === 'always' ? ['jetstream { sync_interval: always }'] : [];
  if (replicas === 1) {
    const server = await startNatsServer({ bin, configLines });
    return { url: server.url, version: server.version, cleanup: () => server.cleanup() };
  }
  const cluster = await startNatsCluster({ bin, configLines, size: replicas });
  return { url: cluster.urls[0]!, version: natsServerVersion(bin), cleanup: () => cluster.cleanup() };
}

async function measure(sync: string, replicas: number): Promise<void> {
  const target = await startTarget(sync, replicas);
  const nc = await connect({ servers: target.url, noAsyncTraces: true });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add(streamConfig(replicas, true));
    const js = jetstream(nc);
    // A pattern the server refuses (a clustered stream takes one fenced
    // message per subject in flight) is reported, not measured.
    const refused = new Map<string, string>();
    const attempt = async (name: string, run: Pattern, n: number): Promise<number | undefined> => {
      if (refused.has(name)) return undefined;
      const chain = await freshChain(jsm);
      const started = performance.now();
      try {
        await run(js, nc, chain, n);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        refused.set(name, `${(err as Error).message}${code === undefined ? '' : ` (err_code ${String(code)})`}`);
        return undefined;
      }
      return n / ((performance.now() - started) / 1000);
    };
    for (const [name, run] of PATTERNS) await attempt(name, run, 256);
    const results = new Map<string, number[]>();
    for (let round = 0; round < ROUNDS; round += 1) {
      // Rotate the order each round so drift (block rollover, page cache) hits all alike.
      const order = PATTERNS.map((_, i) => PATTERNS[(i + round) % PATTERNS.length]!);
      for (const [name, run] of order) {
        const perSec = await attempt(name, run, EVENTS);
        if (perSec !== undefined) results.set(name, [...(results.get(name) ?? []), perSec]);
      }
    }
    const seq = median(results.get('seq') ?? []);
    for (const [name] of PATTERNS) {
      const head = `nats-server ${target.version}  R${replicas}  sync ${sync.padEnd(7)}  ${name.padEnd(8)}`;
      const why = refused.get(name);
      if (why !== undefined) {
        console.log(`${head} refused by the server: ${why}`);
        continue;
      }
      const rounds = results.get(name) ?? [];
      const m = median(rounds);
      console.log(`${head} ${m.toFixed(0).padStart(6)} events/s  (x${(m / seq).toFixed(2)} of seq; rounds ${rounds.map((r) => r.toFixed(0)).join(' ')})`);
    }
  } finally {
    await nc.close();
    await target.cleanup();
  }
}

/** Server behaviour at the edges that decide whether a Tether writer could use batches. */
async function probe(): Promise<void> {
  const target = await startTarget('default', 1);
  const nc = await connect({ servers: target.url, noAsyncTraces: true });
  const say = (what: string, answer: string): void => console.log(`probe ${target.version}: ${what}: ${answer}`);
  const answer = async (p: Promise<{ data: Uint8Array }>): Promise<string> => {
    try {
      const data = (await p).data;
      return data.length === 0 ? '(empty reply: staged)' : new TextDecoder().decode(data);
    } catch (err) {
      return `(no answer: ${(err as Error).message})`;
    }
  };
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add(streamConfig(1, true));
    const info = await jsm.streams.info(STREAM);
    say('allow_atomic kept in the stream config', String((info.config as { allow_atomic?: boolean }).allow_atomic === true));
    const live: string[] = [];
    const sub = nc.subscribe('bench.live.>', { callback: (_err, msg) => void live.push(msg.headers?.get(LogHeader.seq) ?? '?') });
    await nc.flush();

    const send = (chain: Chain, id: string, j: number, opts: { commit?: boolean; expect?: number; msgId?: string } = {}): Promise<{ data: Uint8Array }> => {
      const h = tetherHeaders(chain, j, 0);
      h.set('Nats-Batch-Id', id);
      h.set('Nats-Batch-Sequence', String(j));
      h.set('Nats-Msg-Id', opts.msgId ?? `${chain.session}.0.${j}`);
      if (opts.expect !== undefined) h.set('Nats-Expected-Last-Subject-Sequence', String(opts.expect));
      if (opts.commit === true) h.set('Nats-Batch-Commit', '1');
      return nc.request(chain.subject, PAYLOAD, { headers: h, timeout: 2_000 });
    };

    // 1. Staged messages, each acknowledged: stored or visible before the commit?
    const a = await freshChain(jsm);
    say('staged message 1 (expect last subject seq 0)', await answer(send(a, 'a', 1, { expect: 0 })));
    say('staged message 2', await answer(send(a, 'a', 2)));
    await nc.flush();
    const before = await jsm.streams.getMessage(STREAM, { last_by_subj: a.subject });
    say('before the commit: stored / republished', `${before === null ? 'nothing stored' : `stored at ${before.seq}`} / ${live.length} live messages`);
    say('commit (message 3)', await answer(send(a, 'a', 3, { commit: true })));
    await nc.flush();
    say('after the commit: republished', `${live.length} live messages (seqs ${live.join(',')})`);

    // 2. The same batch again (a writer retrying an in-doubt commit).
    say('the same three messages as a new batch', await answer((async () => {
      await send(a, 'a2', 1, { expect: 0 });
      await send(a, 'a2', 2);
      return send(a, 'a2', 3, { commit: true });
    })()));

    // 3. Expected-last-subject-sequence on a later message of the batch.
    const b = await freshChain(jsm);
    await send(b, 'b', 1, { expect: 0 });
    say('expect (the true position of message 1) on message 2 of a batch to one subject', await answer(send(b, 'b', 2, { expect: b.next, commit: true })));

    // 4. A stream without allow_atomic (every TETHER_LOG created so far).
    await jsm.streams.add({ ...streamConfig(1, false), name: 'BENCH_PLAIN', subjects: ['plain.log.>'], republish: { src: 'plain.log.>', dest: 'plain.live.>' } });
    const c = await freshChain(jsm, 'BENCH_PLAIN', 'plain');
    say('batch on a stream without allow_atomic', await answer(send(c, 'c', 1, { expect: 0 })));
    sub.unsubscribe();
  } finally {
    await nc.close();
    await target.cleanup();
  }
}

/**
 * How many SSE events does one upstream body chunk hold while the pump waits
 * for each ack? An SDK upstream sends `count` progress notifications back
 * to back; each is appended with the pump's pattern (publish, await ack).
 */
async function chunks(sync: string): Promise<void> {
  const target = await startTarget(sync, 1);
  const upstream = await startMcpUpstream();
  const nc = await connect({ servers: target.url, noAsyncTraces: true });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add(streamConfig(1, false));
    const js = jetstream(nc);
    const post = async (body: unknown, session?: string): Promise<Response> =>
      fetch(upstream.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...(session === undefined ? {} : { 'mcp-session-id': session }) },
        body: JSON.stringify(body),
      });
    const init = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '0' } } });
    const session = init.headers.get('mcp-session-id') ?? undefined;
    await init.text();
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session)).text();
    const count = 500;
    const res = await post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'stream_progress', arguments: { count, delayMs: Number(option('delay-ms', '0')) }, _meta: { progressToken: 'p' } } }, session);
    const chain = await freshChain(jsm);
    const parser = new SseParser();
    const perChunk: number[] = [];
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      const msgs = parser.push(chunk);
      perChunk.push(msgs.length);
      for (const _msg of msgs) await sequential(js, nc, chain, 1);
    }
    const withEvents = perChunk.filter((n) => n > 0).sort((x, y) => x - y);
    const events = withEvents.reduce((s, n) => s + n, 0);
    const several = withEvents.filter((n) => n > 1);
    console.log(
      `chunks ${target.version} sync ${sync}, upstream pause ${option('delay-ms', '0')} ms: ${events} events in ${withEvents.length} chunks; ${several.length} chunks held 2+ events ` +
        `(${several.reduce((s, n) => s + n, 0)} events); median ${median(withEvents)}, max ${withEvents[withEvents.length - 1] ?? 0} events per chunk`,
    );
  } finally {
    await nc.close();
    await upstream.close();
    await target.cleanup();
  }
}

console.log(`atomic-batch: ${EVENTS} events per run, ${ROUNDS} rounds, median shown; ${bin}`);
if (flag('probe')) await probe();
if (flag('chunks')) for (const sync of SYNCS) await chunks(sync);
if (!flag('probe') && !flag('chunks')) {
  for (const replicas of option('replicas', '1').split(',').map(Number)) {
    for (const sync of SYNCS) await measure(sync, replicas);
  }
}
