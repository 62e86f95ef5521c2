import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager, PeerInfo } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isSessionLogError, newTaskId, TaskTable } from '@tether/session-log';
import type { StoredTask, TaskRecord, TaskTableOptions } from '@tether/session-log';
import { everyLeaderAnswer, moveStreamLeader, readWhileCutOffLeaderLeads, startNatsCluster } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { ALICE, sleep, whileUnavailable } from './fixtures.js';

// Finding 16: a task created through the leader the majority elected was
// read as "not found" through the old leader, cut off from its peers but
// still reachable, which keeps calling itself leader until it has missed a
// quorum for 10 s. A real 3-node cluster with every route through a proxy
// (`proxyRoutes`), the task stream R3 led by node A, a table connected to
// A only: A is isolated. From 4 s after the cut until A steps down, a read
// of any id through A must fail `log_unavailable` (without the fix A answers
// "not found"). B and C elect a leader, the task is created through B, and
// the read through A must fail `log_unavailable` (never answer "not found")
// until A is back, then find the task. Whether A still leads when the task
// exists depends on the machine's load (CI missed it three rounds running),
// so only the first part is required; the output says whether the second
// was reached.

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster({ size: 3, proxyRoutes: true });
}, 120_000);
// A test that failed while A was cut off leaves the next one a whole cluster.
afterEach(() => cluster?.heal());
afterAll(async () => {
  await cluster?.cleanup();
});

function record(taskId: string): TaskRecord {
  const now = Date.now();
  return {
    v: 1,
    taskId,
    principal: ALICE,
    route: '/mcp',
    tool: 'slow_report',
    status: 'working',
    createdAtMs: now,
    updatedAtMs: now,
    ttlMs: 600_000,
    pollIntervalMs: 1_000,
    runner: null,
    attempts: 1,
    reruns: 0,
    rounds: 0,
    idempotent: false,
    params: { name: 'slow_report', arguments: {} },
    callHeaders: {},
    usedKeys: [],
  };
}

/** The stream's leader and its peers as `jsm`'s node answers, or the error. */
async function view(jsm: JetStreamManager, stream: string): Promise<{ leader: string | undefined; peers: readonly PeerInfo[] } | string> {
  try {
    const cluster = (await jsm.streams.info(stream)).cluster;
    return { leader: cluster?.leader || undefined, peers: cluster?.replicas ?? [] };
  } catch (err) {
    return String(err).slice(0, 80);
  }
}

const activeMs = (peers: readonly PeerInfo[]) => peers.map((p) => `${p.name.replace(/^.*-/, '')} active ${(p.active / 1e6).toFixed(0)} ms current ${p.current}`).join('; ');

/** Errors the table threw, by code and first words, counted. */
function tally(into: Map<string, number>, err: unknown): void {
  const key = isSessionLogError(err) ? `${err.code}: ${err.message.slice(0, 60)}` : `other: ${String(err).slice(0, 60)}`;
  into.set(key, (into.get(key) ?? 0) + 1);
}

const tag = `t${process.pid}_iso`;
const options: TaskTableOptions = { streamName: `TASKS_${tag}`, subjectPrefix: `tt.${tag}`, replicas: 3, maxTtlMs: 3_600_000, requestTimeoutMs: 2_000 };
let ncA: NatsConnection;
let ncB: NatsConnection;
let nameA: string;
let jsmA: JetStreamManager;
let jsmB: JetStreamManager;
/** Connected to node A only. */
let tableA: TaskTable;
/** Connected to node B only. */
let tableB: TaskTable;

beforeAll(async () => {
  ncA = await cluster.connectOnly(0);
  ncB = await cluster.connectOnly(1);
  nameA = ncA.info!.server_name;
  jsmA = await jetstreamManager(ncA, { timeout: 2_000 });
  jsmB = await jetstreamManager(ncB, { timeout: 2_000 });
  tableA = await whileUnavailable(() => TaskTable.open(ncA, jetstream(ncA, { timeout: 2_000 }), jsmA, options));
  tableB = await whileUnavailable(() => TaskTable.open(ncB, jetstream(ncB, { timeout: 2_000 }), jsmB, options));
}, 60_000);

const leadFromA = () => moveStreamLeader(ncB, jsmB, options.streamName, nameA);

describe('TaskTable on a stream leader cut off from its peers', () => {
  it('a task created through the new leader is never "not found" through the old one: log_unavailable until healed, then found', async () => {
    // Reads through A while it led without a quorum: the case no timing misses.
    let staleReads = 0;
    // Rounds in which A still answered "no message" for the task created
    // through B: that needs B and C to elect before A steps down (10-20 s
    // after the cut), which a loaded machine may not give.
    let createdCaseRounds = 0;
    for (let round = 1; round <= 3 && staleReads === 0; round += 1) {
      await leadFromA();
      const cutAt = Date.now();
      const since = () => `${((Date.now() - cutAt) / 1000).toFixed(1)} s`;
      cluster.isolate(0);
      const ranStale = await readWhileCutOffLeaderLeads({
        cutAt,
        jsm: jsmA,
        stream: options.streamName,
        leader: nameA,
        read: async () => {
          const outcome = await tableA.read(newTaskId()).then(
            (stored) => `answered ${stored === undefined ? 'not found' : 'found'}`,
            (err: unknown) => (isSessionLogError(err, 'log_unavailable') ? 'log_unavailable' : `other: ${String(err).slice(0, 80)}`),
          );
          expect(outcome, `an unknown id read through A while it led without a quorum, ${since()} after the cut`).toBe('log_unavailable');
        },
      });
      staleReads += ranStale;
      process.stdout.write(`round ${round}: ${ranStale} reads of unknown ids through A while it still led, from 4 s after the cut: all log_unavailable\n`);
      const seen: string[] = [];
      let newLeader: string | undefined;
      while (newLeader === undefined) {
        if (Date.now() - cutAt > 30_000) throw new Error(`B and C elected no leader in 30 s: ${seen.join(' | ')}`);
        const [fromA, fromB] = await Promise.all([view(jsmA, options.streamName), view(jsmB, options.streamName)]);
        if (typeof fromA !== 'string') seen.push(`${since()} A says leader ${fromA.leader}: ${activeMs(fromA.peers)}`);
        if (typeof fromB !== 'string' && fromB.leader !== undefined && fromB.leader !== nameA) newLeader = fromB.leader;
        else await sleep(250);
      }
      process.stdout.write(`round ${round}: isolated ${nameA}; ${newLeader} elected after ${since()}; A's view meanwhile:\n  ${seen.filter((_, i) => i % 4 === 0 || i === seen.length - 1).join('\n  ')}\n`);

      let created: StoredTask | undefined;
      while (created === undefined) {
        try {
          created = await tableB.create(record(newTaskId()));
        } catch (err) {
          if (!isSessionLogError(err, 'log_unavailable') || Date.now() - cutAt > 40_000) throw err;
          await sleep(200);
        }
      }
      const taskId = created.record.taskId;

      // The stale leader itself: still answering, and without the task.
      const raw = await jsmA.streams.getMessage(options.streamName, { last_by_subj: `${options.subjectPrefix}.edge.task.${taskId}` }).then(
        (msg) => (msg === null ? 'no message' : `found seq ${msg.seq}`),
        (err: unknown) => (/no message found/i.test(String(err)) ? 'no message' : `error: ${String(err).slice(0, 80)}`),
      );
      const staleView = await view(jsmA, options.streamName);
      process.stdout.write(`round ${round}: task created through ${newLeader} at ${since()}; A's own STREAM.MSG.GET: ${raw}; A's STREAM.INFO: ${typeof staleView === 'string' ? staleView : `leader ${staleView.leader}, ${activeMs(staleView.peers)}`}\n`);
      if (raw === 'no message') createdCaseRounds += 1;

      // Through A, until healed: never undefined, always log_unavailable.
      const errors = new Map<string, number>();
      const isolatedUntil = Date.now() + (raw === 'no message' ? 3_000 : 0);
      let reads = 0;
      do {
        reads += 1;
        const got = await tableA.read(taskId).then(
          (stored) => stored,
          (err: unknown) => {
            tally(errors, err);
            return 'threw' as const;
          },
        );
        expect(got, `read ${reads} through the isolated node, ${since()} after the cut`).toBe('threw');
        await sleep(100);
      } while (Date.now() < isolatedUntil);
      expect([...errors.keys()].every((key) => key.startsWith('log_unavailable'))).toBe(true);
      process.stdout.write(`round ${round}: ${reads} reads through A while isolated: ${JSON.stringify(Object.fromEntries(errors))}\n`);

      cluster.heal(0);
      const healedAt = Date.now();
      const afterHeal = new Map<string, number>();
      // Finding 18: read at once and back to back from the heal, when the old
      // leader may still answer from its stale store. A "not found" fails.
      let healedReads = 0;
      for (;;) {
        healedReads += 1;
        const got = await tableA.read(taskId).then(
          (stored) => stored,
          (err: unknown) => {
            tally(afterHeal, err);
            return 'threw' as const;
          },
        );
        if (got === undefined) {
          const ms = Date.now() - healedAt;
          throw new Error(`FINDING 18: read ${healedReads} through A answered "not found" ${ms} ms after the heal; now: ${await everyLeaderAnswer(ncA, options.streamName, `${options.subjectPrefix}.edge.task.${taskId}`)}`);
        }
        if (got !== 'threw') {
          expect(got?.record).toEqual(created.record);
          break;
        }
        if (Date.now() - healedAt > 30_000) throw new Error(`the task was not readable through A 30 s after the heal: ${JSON.stringify(Object.fromEntries(afterHeal))}`);
        // Back to back for the first 3 s, the heal's instant; then at a calmer pace.
        if (Date.now() - healedAt > 3_000) await sleep(250);
      }
      process.stdout.write(`round ${round}: healed; found through A after ${Date.now() - healedAt} ms, ${healedReads} reads (${JSON.stringify(Object.fromEntries(afterHeal))})\n`);
    }
    process.stdout.write(
      createdCaseRounds > 0
        ? `A still answered "no message" for the task created through the new leader in ${createdCaseRounds} round(s); every read of it through A was log_unavailable\n`
        : 'NOT REACHED: A stepped down before the task was created through the new leader in every round (a loaded machine); the created-elsewhere case was not exercised this run, the unknown-id reads above were\n',
    );
    expect(staleReads, 'reads through A while it still led without a quorum').toBeGreaterThan(0);
  }, 240_000);

  it('costs nothing for a task found; a "not found" is confirmed by one STREAM.INFO per 500 ms at most', async () => {
    await leadFromA();
    // STREAM.INFO requests for the stream, as seen on A's connection.
    let infoRequests = 0;
    const sub = ncA.subscribe(`$JS.API.STREAM.INFO.${options.streamName}`, { callback: () => void (infoRequests += 1) });
    await ncA.flush();
    const known = await whileUnavailable(() => tableB.create(record(newTaskId())));
    // For a while after the leader moved, any read can meet 'JetStream system
    // temporarily unavailable' (seen in CI, also after a first read had
    // passed): an explicit answer, not what this test counts, so retried.
    // A 503 is thrown before any check, so it sends no STREAM.INFO.
    for (let i = 0; i < 20; i += 1) expect((await whileUnavailable(() => tableA.read(known.record.taskId)))?.seq).toBe(known.seq);
    await ncA.flush();
    expect(infoRequests).toBe(0);
    const startedAt = Date.now();
    let unknownReads = 0;
    while (Date.now() - startedAt < 1_000) {
      expect(await whileUnavailable(() => tableA.read(newTaskId()))).toBeUndefined();
      unknownReads += 1;
    }
    await ncA.flush();
    sub.unsubscribe();
    expect(infoRequests).toBeGreaterThan(0);
    expect(infoRequests).toBeLessThanOrEqual(4);
    const healthy = await view(jsmA, options.streamName);
    if (typeof healthy === 'string') throw new Error(healthy);
    process.stdout.write(`healthy leader ${healthy.leader}: ${activeMs(healthy.peers)}; ${unknownReads} unknown-id reads in 1 s took ${infoRequests} STREAM.INFO\n`);
  }, 60_000);
});
