/**
 * nats-server#4320 on both servers Tether runs on: two publishers send the
 * same `Nats-Expected-Last-Subject-Sequence` to an R3 stream's leader before
 * the first one is applied.
 *
 * 2.9.10 checks the header on the leader against what is *stored*, before
 * proposing (processClusteredInboundMsg), so both proposals pass; the apply
 * step then skips the check on a clustered stream when the expected
 * sequence is > 0 ("we have prechecked"), and both are stored. 2.9.21
 * removed that skip, so the second proposal is refused when applied
 * (err_code 10071). Servers from 2.11 also check before proposing,
 * counting what is in flight: 10164 while a fenced proposal on the subject
 * is (`expectedPerSubjectInProcess`), else 10071 against what is stored.
 *
 * Each version gets its own 3-node cluster. The raw race uses distinct
 * message ids, as #4320's reproduction does. Tether's writers derive the
 * message id from (session, stream, seq), so two of them racing for one seq
 * share it, and the duplicate check catches the loser where the sequence
 * check would not: on 2.9.10 when both proposals are applied (the duplicate
 * check runs there, before the skipped sequence check), on current servers
 * before proposing (err_code 10158 while the winner is in flight, which the
 * writer waits out). Either way the loser gets a duplicate ack for bytes that
 * are not its own, which the writer verifies: `writer_conflict`. On 2.9.10 a
 * loser that arrives after the winner was applied is refused by the
 * leader's precheck instead (10071). A publisher whose message id differs
 * (not Tether's writer) gets through on 2.9.10, and then only the readers'
 * chain check stands.
 *
 * Measured on this machine (2 cores, also with cores busy): on 2.9.10 the
 * raw race stored both in 60-90% of races with both publishers on the
 * leader and 40-74% with one on a follower, in every run; the rival with
 * another message id in 12-78%. So each case asserts the race showed at
 * least once in its bounded attempts (a miss has odds far below 1e-9).
 * Everything else asserted here holds for every race on either version.
 */
import { existsSync } from 'node:fs';
import { headers } from '@nats-io/transport-node';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LogHeader } from '@tether/protocol';
import { createSubjects, isSessionLogError, SessionLog } from '@tether/session-log';
import type { Cursor, LogEvent, SessionRecord } from '@tether/session-log';
import { findNatsServerBinary, natsServerVersion, startNatsCluster } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { ALICE, bytes, isolatedNames } from './fixtures.js';

/** Races per case, and the time each case may take: whichever ends first. */
const RAW_RACES = 200;
const TETHER_RACES = 100;
const CASE_BUDGET_MS = 10_000;

/** JetStream err_codes of a refused expected-last-subject-sequence (nats-server errors.json). */
const WRONG_LAST_SEQUENCE = 10071;
/** 2.11+: refused before proposing, because a proposal on the same subject is in flight. */
const WRONG_LAST_SEQUENCE_IN_FLIGHT = 10164;
const FIXED_IN = '2.9.21';

interface Target {
  readonly role: 'current' | 'floor';
  readonly bin: string;
  readonly version: string;
}

function newer(version: string, than: string): boolean {
  const [a = 0, b = 0, c = 0] = version.split('.').map(Number);
  const [x = 0, y = 0, z = 0] = than.split('.').map(Number);
  return a !== x ? a > x : b !== y ? b > y : c >= z;
}

/** The binary of one role, or why that role is not tested here (naming the binary). */
function resolveTarget(role: Target['role']): Target | string {
  const envName = role === 'current' ? 'NATS_SERVER_BIN' : 'TETHER_NATS_FLOOR_BIN';
  let bin: string | undefined;
  if (role === 'current') {
    try {
      bin = findNatsServerBinary();
    } catch (err) {
      return `SKIPPED: the fenced case is NOT tested: no current nats-server (${String(err)}); set NATS_SERVER_BIN=$(scripts/nats-server.sh current)`;
    }
  } else {
    const floor = process.env['TETHER_NATS_FLOOR_BIN'];
    bin = floor !== undefined && floor !== '' ? floor : existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : undefined;
    if (bin === undefined) return `SKIPPED: the #4320 reproduction is NOT run: no 2.9 floor nats-server (TETHER_NATS_FLOOR_BIN unset, /usr/sbin/nats-server missing; apt-get install -y nats-server)`;
  }
  let version: string;
  try {
    version = natsServerVersion(bin);
  } catch (err) {
    return `SKIPPED: the ${role} nats-server ${bin} does not run (${String(err)}); set ${envName}`;
  }
  if (role === 'current' && !newer(version, FIXED_IN)) {
    return `SKIPPED: the fenced case is NOT tested in this run: the current nats-server (NATS_SERVER_BIN, else PATH) ${bin} is ${version}, older than the #4320 fix (${FIXED_IN}); npm test's floor run does this on purpose (its main run tests it), elsewhere set NATS_SERVER_BIN=$(scripts/nats-server.sh current)`;
  }
  if (role === 'floor' && newer(version, FIXED_IN)) {
    return `SKIPPED: the #4320 reproduction is NOT run: the floor nats-server ${bin} is ${version}, which has the fix; set TETHER_NATS_FLOOR_BIN to a 2.9.10`;
  }
  return { role, bin, version };
}

type Outcome = { readonly t: 'stored'; readonly ack: PubAck } | { readonly t: 'refused'; readonly code: string; readonly message: string };

async function settle(p: Promise<PubAck>): Promise<Outcome> {
  try {
    return { t: 'stored', ack: await p };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return { t: 'refused', code: typeof code === 'number' ? String(code) : `no err_code: ${String(err).slice(0, 120)}`, message: String(err) };
  }
}

const bump = (into: Record<string, number>, key: string): void => {
  into[key] = (into[key] ?? 0) + 1;
};
const total = (counts: Record<string, number>): number => Object.values(counts).reduce((n, k) => n + k, 0);

/**
 * Publishes to `subject` through every connection until each one is
 * stored: right after a stream is created, a node other than its leader may
 * answer "no responders" for a while (seen on 2.15.1 for over 400 ms), and
 * a race through it would measure that instead.
 */
async function untilEveryNodeStores(conns: readonly NatsConnection[], subject: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (const nc of conns) {
    const js = jetstream(nc);
    for (;;) {
      const o = await settle(js.publish(subject, bytes('warm-up'), { timeout: 1_000 }));
      if (o.t === 'stored') break;
      if (Date.now() > deadline) throw new Error(`${nc.info?.server_name ?? 'a node'} still refuses publishes to ${subject}: ${o.message}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

interface RawTally {
  attempts: number;
  doubleStores: number;
  /** Refused losers, by err_code. */
  refusals: Record<string, number>;
  /** Races in which both publishes were refused (never expected). */
  bothRefused: string[];
  ms: number;
}

/**
 * Races pairs of publishes: each pair on a fresh subject holding one
 * message at stream sequence S, both expecting S, distinct message ids,
 * one on each connection, sent in the same tick.
 */
async function rawRaces(prefix: string, a: JetStreamClient, b: JetStreamClient): Promise<RawTally> {
  const tally: RawTally = { attempts: 0, doubleStores: 0, refusals: {}, bothRefused: [], ms: 0 };
  const started = Date.now();
  for (let i = 0; i < RAW_RACES && Date.now() - started < CASE_BUDGET_MS; i += 1) {
    const subject = `${prefix}.${i}`;
    const base = await a.publish(subject, bytes('base'), { msgID: `${subject}.base` });
    const expect = { lastSubjectSequence: base.seq };
    const outcomes = await Promise.all([
      settle(a.publish(subject, bytes('a'), { msgID: `${subject}.a`, expect })),
      settle(b.publish(subject, bytes('b'), { msgID: `${subject}.b`, expect })),
    ]);
    tally.attempts += 1;
    const refused = outcomes.flatMap((o) => (o.t === 'refused' ? [o] : []));
    if (refused.length === 0) tally.doubleStores += 1;
    else if (refused.length === 1) bump(tally.refusals, refused[0]!.code);
    else tally.bothRefused.push(refused.map((o) => o.message).join(' / '));
  }
  tally.ms = Date.now() - started;
  return tally;
}

interface TetherTally {
  attempts: number;
  /** Both were told their event is stored: two events claim the same seq. */
  bothStored: number;
  /** How each loser ended (`stored` when both won), by error code. */
  losers: Record<string, number>;
  /**
   * How each reader ended, `<race> <reader>: <how>`: race `fork` (both
   * stored) or `one` (one stored); reader `live` (opened before the race)
   * or `log` (the whole stream read afterwards); `ok` (after the end, one
   * event per seq) or the error code.
   */
  reads: Record<string, number>;
  /** Reads that failed other than a fork reported as `stream_diverged`, with what they said. */
  failedReads: string[];
  ms: number;
}

/**
 * A session-log error code, with the JetStream err_code behind it when there
 * is one; a `writer_conflict` without one came from a duplicate ack whose
 * stored bytes were not ours.
 */
function codeOf(err: unknown): string {
  const js = (e: unknown): unknown => (e as { code?: unknown } | undefined)?.code;
  if (isSessionLogError(err)) {
    const behind = js(err.cause);
    if (typeof behind === 'number') return `${err.code} (err_code ${behind})`;
    return err.code === 'writer_conflict' ? `${err.code} (duplicate ack)` : err.code;
  }
  const code = js(err);
  return typeof code === 'number' ? `refused (err_code ${code})` : `unexpected: ${String(err)}`;
}

/** Throws unless every event follows the one before it, starting after `from`. */
function assertChain(from: Cursor, events: readonly LogEvent[]): void {
  let last = from;
  for (const e of events) {
    if (e.seq !== last.seq + 1 || e.prev !== last.pos) throw new Error(`seq ${e.seq} (prev ${e.prev}) after seq ${last.seq} at ${last.pos}: a reader saw a broken chain silently`);
    last = e;
  }
}

/** Undefined when the reader ended after the stream's end; else the error it ended with, or a timeout. */
async function readAll(events: AsyncGenerator<LogEvent, void, undefined>, into: LogEvent[], abort: AbortController): Promise<unknown> {
  const timer = setTimeout(() => abort.abort(), 5_000);
  try {
    for await (const event of events) into.push(event);
    return abort.signal.aborted ? new Error('timeout: the reader did not reach the end in 5 s') : undefined;
  } catch (err) {
    return err;
  } finally {
    clearTimeout(timer);
  }
}

const describeErr = (err: unknown): string => (isSessionLogError(err) ? `${err.code} (${err.message}, ${JSON.stringify(err.fields)})` : String(err));

/**
 * The second publisher of a Tether race (another `SessionLog`'s writer, or a
 * raw publish of the same event under another message id), made ready at
 * the stream's end before the race: it returns the publish to race.
 */
type Rival = (stream: string, first: Cursor) => Promise<(payload: Uint8Array) => Promise<unknown>>;

/**
 * Per race: a fresh stream with one event; `one`'s writer and the rival both
 * append seq 2 after it, at once. A live reader opened before the race and a
 * read of the whole stream from the log afterwards must each see one event
 * per seq, or fail explicitly.
 */
async function tetherRaces(one: SessionLog, session: SessionRecord, rival: Rival): Promise<TetherTally> {
  const tally: TetherTally = { attempts: 0, bothStored: 0, losers: {}, reads: {}, failedReads: [], ms: 0 };
  const sid = session.sessionId;
  const started = Date.now();
  for (let i = 0; i < TETHER_RACES && Date.now() - started < CASE_BUDGET_MS; i += 1) {
    const stream = one.newStreamId();
    const first = await one.append(sid, stream, 'event', bytes('first'), { opensStream: { epoch: session.epoch } });
    const [writer, second] = await Promise.all([one.openWriter(sid, stream, true), rival(stream, first)]);
    const reader = one.openReader(session, stream);
    const abort = new AbortController();
    const live: LogEvent[] = [];
    const liveEnd = readAll(reader.follow(first, { signal: abort.signal }), live, abort);

    const results = await Promise.allSettled([writer.append('event', bytes(`one-${i}`)), second(bytes(`two-${i}`))]);
    tally.attempts += 1;
    const lost = results.flatMap((r) => (r.status === 'rejected' ? [codeOf(r.reason)] : []));
    if (lost.length === 0) {
      tally.bothStored += 1;
      bump(tally.losers, 'stored');
    }
    for (const code of lost) bump(tally.losers, code);
    // End the stream from its current end, so the live reader ends.
    await (await one.openWriter(sid, stream, true)).append('end', bytes(''));

    const liveErr = await liveEnd;
    if (liveErr === undefined) assertChain(first, live);
    let logErr: unknown;
    try {
      assertChain({ seq: 0, pos: 0 }, await one.readPage(sid, stream, 0, 100));
    } catch (err) {
      if (!isSessionLogError(err)) throw err;
      logErr = err;
    }
    const race = lost.length === 0 ? 'fork' : 'one';
    for (const [reader, err] of [['live', liveErr], ['log', logErr]] as const) {
      bump(tally.reads, `${race} ${reader}: ${err === undefined ? 'ok' : codeOf(err)}`);
      const expected = err === undefined || (race === 'fork' && isSessionLogError(err, 'stream_diverged'));
      if (!expected) tally.failedReads.push(`race ${i} (${race}), ${reader} reader after ${reader === 'live' ? live.length : '?'} events: ${describeErr(err)}`);
    }
  }
  tally.ms = Date.now() - started;
  return tally;
}

/**
 * Where one event was stored both readers end normally; every fork fails
 * both, explicitly: the log read with `stream_diverged`. The live reader
 * may say `stream_truncated` instead on 2.9: an event out of line sends it
 * to the log to reach that event's position, and its R1 replay consumer is
 * placed on a random replica (2.9's createGroupForConsumer), which may not
 * have stored what the leader already republished. The same happens without
 * a fork, about once in 500 races here: the reader, opened just before
 * the race, missed the first republished event (its interest had not yet
 * reached the leader over the routes), took the next one for a gap, and the
 * lagging replica did not hold it. Explicit, never silent, so allowed on 2.9.
 */
function expectReads(tally: TetherTally, fenced: boolean): void {
  const forks = tally.bothStored;
  const clean = tally.attempts - forks;
  const {
    'one live: ok': liveOk = 0,
    'one live: stream_truncated': liveFalseAlarm = 0,
    'one log: ok': logOk = 0,
    'fork live: stream_diverged': liveDiverged = 0,
    'fork live: stream_truncated': liveTruncated = 0,
    'fork log: stream_diverged': logForks = 0,
    ...other
  } = tally.reads;
  expect(other).toEqual({});
  expect([liveOk + liveFalseAlarm, logOk, liveDiverged + liveTruncated, logForks]).toEqual([clean, clean, forks, forks]);
  if (fenced) expect([liveFalseAlarm, liveTruncated]).toEqual([0, 0]);
}

const targets = (['current', 'floor'] as const).map(resolveTarget);
for (const t of targets) if (typeof t === 'string') console.warn(`\n[session-log/fencing] ${t}\n`);

for (const t of targets) {
  if (typeof t === 'string') {
    describe.skip(t, () => {
      it('#4320 race', () => undefined);
    });
    continue;
  }
  const fenced = t.role === 'current';
  describe(`nats-server ${t.version} (${t.role}, ${t.bin}), 3-node R3: two writers expect the same last subject sequence`, () => {
    let cluster: NatsCluster;
    const conns: NatsConnection[] = [];
    const logs: SessionLog[] = [];
    const say = (line: string) => process.stdout.write(`[fencing ${t.version}] ${line}\n`);
    beforeAll(async () => {
      cluster = await startNatsCluster({ bin: t.bin, size: 3 });
      for (const url of cluster.urls) conns.push(await connect({ servers: url }));
    }, 120_000);
    afterAll(async () => {
      for (const log of logs) await log.close();
      for (const nc of conns) await nc.close().catch(() => undefined);
      await cluster?.cleanup();
    });

    it(`#4320's reproduction, raw publishes with distinct message ids: ${fenced ? 'the second writer is refused' : 'both can be stored'}`, async () => {
      const stream = `RACE_${process.pid}`;
      const prefix = stream.toLowerCase();
      const jsm = await jetstreamManager(conns[0]!);
      await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`], num_replicas: 3, storage: StorageType.File });
      await untilEveryNodeStores(conns, `${prefix}.warm-up`);
      const leaderName = (await jsm.streams.info(stream)).cluster?.leader;
      const leaderIndex = conns.findIndex((nc) => nc.info?.server_name === leaderName);
      expect(leaderIndex).toBeGreaterThanOrEqual(0);
      const onLeader = await connect({ servers: cluster.urls[leaderIndex]! });
      conns.push(onLeader);
      const leader = jetstream(conns[leaderIndex]!);
      const follower = jetstream(conns[(leaderIndex + 1) % 3]!);

      // Both on the leader: the pair arrives together. Through a follower
      // one publish takes an extra hop, and the pair overlaps less often.
      const arrangements = [
        { name: 'both on the leader', tally: await rawRaces(`${prefix}.leader`, leader, jetstream(onLeader)) },
        { name: 'leader and a follower', tally: await rawRaces(`${prefix}.follower`, leader, follower) },
      ];

      const si = await jsm.streams.info(stream, { subjects_filter: '>' });
      for (const { name, tally } of arrangements) {
        const key = name === 'both on the leader' ? `${prefix}.leader.` : `${prefix}.follower.`;
        // What the server holds agrees with the acks: every race both publishes won left 3 messages.
        const doubled = Object.entries(si.state.subjects ?? {}).filter(([subject, n]) => subject.startsWith(key) && n === 3).length;
        say(`raw, ${name}: ${tally.attempts} races in ${tally.ms} ms, stored both ${tally.doubleStores} (subjects holding two successors of one message: ${doubled}), losers refused by err_code ${JSON.stringify(tally.refusals)}`);
        expect(doubled).toBe(tally.doubleStores);
        expect(tally.bothRefused).toEqual([]);
        expect(tally.attempts).toBeGreaterThanOrEqual(50);
        expect(tally.doubleStores + total(tally.refusals)).toBe(tally.attempts);
        if (fenced) {
          expect(tally.doubleStores).toBe(0);
          for (const code of Object.keys(tally.refusals)) expect([String(WRONG_LAST_SEQUENCE), String(WRONG_LAST_SEQUENCE_IN_FLIGHT)]).toContain(code);
        } else {
          // A loser on 2.9.10 is only ever refused by the leader's precheck.
          for (const code of Object.keys(tally.refusals)) expect(code).toBe(String(WRONG_LAST_SEQUENCE));
        }
      }
      // The race itself, on the floor (shown in 40-90% of races here).
      if (!fenced) for (const { tally } of arrangements) expect(tally.doubleStores).toBeGreaterThan(0);
    });

    const report = (what: string, tally: TetherTally) =>
      say(`${what}: ${tally.attempts} races in ${tally.ms} ms, both stored ${tally.bothStored}, losers ${JSON.stringify(tally.losers)}, reads ${JSON.stringify(tally.reads)}${tally.failedReads.map((r) => `\n  ${r}`).join('')}`);

    it(`Tether's writers in the same race, on two nodes: the loser fails writer_conflict, readers see one event per seq`, async () => {
      const names = isolatedNames();
      const one = await SessionLog.create({ servers: cluster.urls[0]!, ...names, replicas: 3 });
      logs.push(one);
      const two = await SessionLog.create({ servers: cluster.urls[1]!, ...names, replicas: 3 });
      logs.push(two);
      await untilEveryNodeStores(conns, createSubjects(one.config.subjectPrefix).log('warm-up', '0'));
      const session = await one.createSession(ALICE);
      const tally = await tetherRaces(one, session, async (stream) => {
        const writer = await two.openWriter(session.sessionId, stream, true);
        return (payload) => writer.append('event', payload);
      });
      report('Tether writers', tally);
      expect(tally.attempts).toBeGreaterThanOrEqual(20);
      // Same message id: the duplicate check meets the loser first, so nothing is stored twice, on either version.
      expect(tally.bothStored).toBe(0);
      for (const code of Object.keys(tally.losers)) expect(code).toMatch(/^writer_conflict /);
      expect(total(tally.losers)).toBe(tally.attempts);
      expectReads(tally, fenced);
    });

    it(`a rival with another message id (not Tether's writer): ${fenced ? 'refused' : 'a double store is reported by every reader'}`, async () => {
      const names = isolatedNames();
      const one = await SessionLog.create({ servers: cluster.urls[0]!, ...names, replicas: 3 });
      logs.push(one);
      const subjects = createSubjects(one.config.subjectPrefix);
      await untilEveryNodeStores(conns, subjects.log('warm-up', '0'));
      const session = await one.createSession(ALICE);
      const js = jetstream(conns[1]!);
      // The event Tether's writer would append, under a message id of its own.
      const rival: Rival = async (stream, first) => (payload) => {
        const h = headers();
        h.set(LogHeader.epoch, session.epoch);
        h.set(LogHeader.seq, String(first.seq + 1));
        h.set(LogHeader.prev, String(first.pos));
        h.set(LogHeader.kind, 'event');
        return js.publish(subjects.log(session.sessionId, stream), payload, { headers: h, msgID: `rival.${stream}`, expect: { lastSubjectSequence: first.pos } });
      };
      const tally = await tetherRaces(one, session, rival);
      report('rival with another msg id', tally);
      expect(tally.attempts).toBeGreaterThanOrEqual(20);
      if (fenced) expect(tally.bothStored).toBe(0);
      else expect(tally.bothStored).toBeGreaterThan(0);
      expectReads(tally, fenced);
    });
  });
}
