import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { createSubjects, isSessionLogError, principalDigest, SessionLog } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { decodeEventId } from '@tether/protocol';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { createWriterPresence, isTetherSdkError, requestsOfTransport, SDK_GET_STREAM, TetherEventStore } from '@tether/sdk';
import type { JsonRpcMessage, SdkTransport, WriterPresence } from '@tether/sdk';
import { buildServer, isolatedNames, transportClass } from './router-fixtures.js';
import type { SdkMajor } from './router-fixtures.js';

// The EventStore on its own (issue 13, item 1), under the SDK's own
// transport and resume path: no router. Requests go straight to the SDK's
// web-standard `handleRequest`, the way a user's server would pass them.

let nats: NatsServer;
const logs: SessionLog[] = [];
const presences: WriterPresence[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  for (const p of presences) await p.close();
  for (const log of logs) await log.close();
  await nats?.cleanup();
});

const URL_ = 'http://127.0.0.1/mcp';
const POST_HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' };

/** One "process": its own connection, presence, and an SDK transport + server for `session` whose store is ours. */
async function processFor(major: SdkMajor, names: ReturnType<typeof isolatedNames>, session: SessionRecord | undefined) {
  const log = await SessionLog.create({ servers: nats.url, ...names });
  logs.push(log);
  const presence = createWriterPresence(log);
  presences.push(presence);
  const record = session ?? (await log.createSession(principalDigest('Bearer alice')));
  const errors: unknown[] = [];
  let transport!: SdkTransport;
  const store = new TetherEventStore({ log, session: record, presence, requestsOf: (id) => requestsOfTransport(transport)(id), writerWatch: { checkMs: 100 } });
  const Transport = transportClass(major);
  transport = new Transport({ sessionIdGenerator: () => record.sessionId, eventStore: store, onsessionclosed: () => undefined });
  (transport as unknown as { onerror?: (err: unknown) => void }).onerror = (err) => errors.push(err);
  await buildServer(major, () => false).connect(transport as never);
  const post = (body: unknown) => transport.handleRequest(new Request(URL_, { method: 'POST', headers: { ...POST_HEADERS, 'mcp-session-id': record.sessionId } }), { parsedBody: body });
  const get = (lastEventId: string) =>
    transport.handleRequest(new Request(URL_, { headers: { accept: 'text/event-stream', 'mcp-session-id': record.sessionId, 'mcp-protocol-version': '2025-11-25', 'last-event-id': lastEventId } }));
  const initialize = async (): Promise<void> => {
    const answer = await transport.handleRequest(new Request(URL_, { method: 'POST', headers: POST_HEADERS }), {
      parsedBody: { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } },
    });
    await answer.text();
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).body?.cancel();
  };
  await initialize();
  return { log, record, store, transport, post, get, errors };
}

interface Frame {
  readonly id: string | undefined;
  readonly message: { id?: unknown; method?: string; params?: { progress?: number }; result?: { content?: { text: string }[] } } | undefined;
}

/** SSE frames of a response until one carries a JSON-RPC result (v1 leaves a replayed stream open after it). */
async function framesUntilResult(res: Response): Promise<Frame[]> {
  const reader = res.body!.getReader();
  const frames: Frame[] = [];
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += new TextDecoder().decode(value);
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const id = /^id: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      const message = data === undefined || data.trim() === '' ? undefined : (JSON.parse(data) as Frame['message']);
      if (id === undefined && message === undefined) continue;
      frames.push({ id, message });
      if (message?.result !== undefined) {
        await reader.cancel();
        return frames;
      }
    }
  }
  return frames;
}

const callStream = (id: number, count: number, delayMs: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'stream', arguments: { count, delayMs }, _meta: { progressToken: `p${id}` } } });
const progressOf = (frames: readonly Frame[]) => frames.flatMap((f) => (f.message?.method === 'notifications/progress' ? [f.message.params!.progress!] : []));

describe.each(['v1', 'v2'] as const)('TetherEventStore under the SDK %s transport', (major) => {
  it('stores every event before the SDK sends it, with Tether ids, and replays the exact suffix after a cursor', async () => {
    const a = await processFor(major, isolatedNames(), undefined);
    const frames = await framesUntilResult(await a.post(callStream(1, 20, 0)));
    // The priming event is the stream's opening prime: a Tether id with no message.
    expect(frames[0]!.message).toBeUndefined();
    expect(frames[0]!.id).toMatch(/^[a-z2-7]{10}-[a-z2-7]{8}-1-\d+$/);
    expect(progressOf(frames)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const cursor = frames.find((f) => f.message?.params?.progress === 10)!.id!;
    expect(await a.store.getStreamIdForEventId(cursor)).toBeDefined();
    const replay = await framesUntilResult(await a.get(cursor));
    expect(progressOf(replay)).toEqual(Array.from({ length: 10 }, (_, i) => i + 11));
    expect(replay.at(-1)!.message!.result!.content![0]!.text).toBe('streamed 20');
    expect(replay.map((f) => f.id)).toEqual(frames.slice(frames.findIndex((f) => f.id === cursor) + 1).map((f) => f.id));
  });

  it('follows a stream another process is still writing, to its end, through the SDK resume path', async () => {
    const names = isolatedNames();
    const a = await processFor(major, names, undefined);
    const b = await processFor(major, names, a.record);
    const live = await a.post(callStream(2, 40, 10));
    const reader = live.body!.getReader();
    // Read A's stream until its fifth progress event, then resume from there on B.
    let text = '';
    while ((text.match(/notifications\/progress/g) ?? []).length < 5) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const ids = [...text.matchAll(/^id: (.+)$/gm)].map((m) => m[1]!);
    const cursor = ids.at(-1)!;
    const seenBefore = progressOf(text.split('\n\n').map((block) => ({ id: undefined, message: /^data: (\{.*)$/m.exec(block) ? JSON.parse(/^data: (\{.*)$/m.exec(block)![1]!) : undefined })));
    const rest = await framesUntilResult(await b.get(cursor));
    expect([...seenBefore, ...progressOf(rest)]).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(rest.at(-1)!.message!.result!.content![0]!.text).toBe('streamed 40');
  });

  it('refuses a foreign cursor with an error status (the SDK answers 500; onerror gets the verdict), a malformed one with 400', async () => {
    const names = isolatedNames();
    const a = await processFor(major, names, undefined);
    const other = await processFor(major, names, undefined);
    const foreign = (await framesUntilResult(await other.post(callStream(3, 1, 0))))[0]!.id!;
    const refused = await a.get(foreign);
    expect(refused.status).toBe(500);
    expect(refused.headers.get('content-type')).toMatch(/application\/json/);
    const why = a.errors.find((e) => isTetherSdkError(e, 'resume_refused'));
    expect(why).toBeDefined();
    expect(isTetherSdkError(why) && why.fields.verdict).toBe('epoch_mismatch');
    const malformed = await a.get('not-a-tether-id');
    expect(malformed.status).toBe(400);
  });

  it('answers a GET-stream cursor with an error status, never a replay that cannot end (the router serves those)', async () => {
    const a = await processFor(major, isolatedNames(), undefined);
    // A server notification with no request: the SDK stores it on its GET stream.
    const cursor = await a.store.storeEvent(SDK_GET_STREAM, { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } });
    const answer = await a.get(cursor);
    expect(answer.status).toBe(500);
    expect(a.errors.some((e) => isTetherSdkError(e, 'unsupported'))).toBe(true);
  });
});

describe('TetherEventStore on the GET stream of two instances', () => {
  // Found by the SDK fuzz suite (test/fuzz/sdk.fuzz.test.ts, "race"): when
  // another instance had appended to the GET stream, concurrent stores on
  // this one all failed writer_conflict at once and retried each on a writer
  // of its own, so they landed in the order those writers opened, not in
  // the order the SDK stored them.
  it('keeps each instance\'s concurrent stores in call order, each stored once, while the other instance writes too', async () => {
    const names = isolatedNames();
    const logA = await SessionLog.create({ servers: nats.url, ...names });
    const logB = await SessionLog.create({ servers: nats.url, ...names });
    logs.push(logA, logB);
    const [presenceA, presenceB] = [createWriterPresence(logA), createWriterPresence(logB)];
    presences.push(presenceA, presenceB);
    const session = await logA.createSession(principalDigest('Bearer alice'));
    const a = new TetherEventStore({ log: logA, session, presence: presenceA });
    const b = new TetherEventStore({ log: logB, session, presence: presenceB });
    const note = (who: string, n: number): JsonRpcMessage => ({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `${who}${n}` } });
    let n = 0;
    for (let round = 0; round < 5; round += 1) {
      // B's writer now stands one event behind the stream's end: its next appends conflict.
      await b.storeEvent(SDK_GET_STREAM, note('b', n++));
      await a.storeEvent(SDK_GET_STREAM, note('a', n++));
      await Promise.all([...Array.from({ length: 6 }, () => b.storeEvent(SDK_GET_STREAM, note('b', n++))), ...Array.from({ length: 3 }, () => a.storeEvent(SDK_GET_STREAM, note('a', n++)))]);
    }
    const stored = (await logA.readPage(session.sessionId, '0', 0, 1_000)).map((e) => (JSON.parse(Buffer.from(e.payload).toString('utf8')) as { params: { data: string } }).params.data);
    expect(stored).toHaveLength(n);
    expect(new Set(stored).size).toBe(n);
    for (const who of ['a', 'b']) {
      const mine = stored.filter((d) => d.startsWith(who)).map((d) => Number(d.slice(1)));
      expect(mine).toEqual([...mine].sort((x, y) => x - y));
    }
  });
});

describe('TetherEventStore while the log is unavailable', () => {
  // A notification on the GET stream stored while NATS is frozen: its first
  // attempt times out with its bytes in the socket, the thaw stores them.
  // The store retries until it is answered, and the retry finds the attempt
  // that landed: one notification, stored once, and the SDK's send succeeds.
  it('retries a GET-stream notification until the log answers, and stores it once', async () => {
    const log = await SessionLog.create({ servers: nats.url, ...isolatedNames(), requestTimeoutMs: 300 });
    logs.push(log);
    const presence = createWriterPresence(log);
    presences.push(presence);
    const session = await log.createSession(principalDigest('Bearer alice'));
    const store = new TetherEventStore({ log, session, presence });
    const note = (data: string): JsonRpcMessage => ({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data } });
    await store.storeEvent(SDK_GET_STREAM, note('before'));
    await nats.freeze();
    let stored: Promise<string>;
    try {
      stored = store.storeEvent(SDK_GET_STREAM, note('frozen'));
      stored.catch(() => undefined);
      // Long enough for the first attempt to fail (3 publishes of 300 ms) and a retry or two to fail too.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    } finally {
      await nats.thaw();
    }
    const cursor = decodeEventId(await stored);
    expect(cursor.ok && cursor.value.seq).toBe(2);
    await store.storeEvent(SDK_GET_STREAM, note('after'));
    const page = await log.readPage(session.sessionId, '0', 0, 10);
    expect(page.map((e) => (JSON.parse(Buffer.from(e.payload).toString('utf8')) as { params: { data: string } }).params.data)).toEqual(['before', 'frozen', 'after']);
  });
});

describe('TetherEventStore when retention takes the rest of a stream', () => {
  // Found by the SDK fuzz suite under load: a resume accepted while the
  // stream was open, then its last events (end included) stored and all
  // evicted before the reader read them. The reader then waited for live
  // events that could never come, and the writer check saw an empty stream
  // and did nothing: the replay never ended.
  it('ends the reader with stream_truncated instead of waiting forever', async () => {
    const log = await SessionLog.create({ servers: nats.url, ...isolatedNames() });
    logs.push(log);
    const presence = createWriterPresence(log);
    presences.push(presence);
    const session = await log.createSession(principalDigest('Bearer alice'));
    const store = new TetherEventStore({ log, session, presence, writerWatch: { checkMs: 50 } });
    const cursor = await store.storeEvent('sdk-1', { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'one' } });
    const resumed = await store.resume(cursor);
    expect(resumed.verdict).toBe('resumed');
    if (resumed.verdict !== 'resumed') return;
    // What max_age (or a stream-wide max_bytes) does to a whole stream,
    // here while its writer is idle: nothing is left to read, and nothing
    // will come. (An event stored after the resume, before the purge,
    // would reach the reader live, stored and exact: the resume's live tail
    // opens before its classification reads the log.)
    const jsm = await jetstreamManager(log.connection);
    await jsm.streams.purge(log.config.streamName, { filter: createSubjects(log.config.subjectPrefix).log(session.sessionId, resumed.accepted.stream) });
    const abort = new AbortController();
    const read = (async () => {
      for await (const event of resumed.events(abort.signal)) void event;
    })();
    const outcome = await Promise.race([read.then(() => 'ended', (err: unknown) => err), new Promise((resolve) => setTimeout(resolve, 5_000, 'still waiting'))]);
    abort.abort();
    expect(isSessionLogError(outcome, 'stream_truncated')).toBe(true);
  });

  // Found by the SDK fuzz suite (seed 20261201): a replay from a cursor on a
  // stream's `end`, with retention evicting the whole stream meanwhile. The
  // log read the cursor's event before the purge and the stream's last event
  // after it, accepted the cursor as if the stream went on, and the reader
  // then reported the client's complete stream as evicted (stream_truncated).
  // What the client may be told: nothing is left (it has everything), or the
  // truncation any resume after the purge gets; never a loss of data it has.
  // A race: about 1 round in 30 hits the window on a current server.
  it('never reports a stream whose end the cursor names as evicted, whenever the purge lands', async () => {
    const log = await SessionLog.create({ servers: nats.url, ...isolatedNames() });
    logs.push(log);
    const presence = createWriterPresence(log);
    presences.push(presence);
    const purger = await SessionLog.create({ servers: nats.url, ...isolatedNames() });
    logs.push(purger);
    const jsm = await jetstreamManager(purger.connection);
    const subjects = createSubjects(log.config.subjectPrefix);
    const outcomes = new Map<string, number>();
    for (let round = 0; round < 400; round += 1) {
      const session = await log.createSession(principalDigest('Bearer alice'));
      const store = new TetherEventStore({ log, session, presence, writerWatch: { checkMs: 50 } });
      const answered = decodeEventId(await store.storeEvent('sdk-1', { jsonrpc: '2.0', id: 1, result: {} }));
      if (!answered.ok) throw new Error(answered.reason);
      const { stream } = answered.value;
      const end = await log.head(session.sessionId, stream);
      expect(end?.kind).toBe('end');
      const purge = () => jsm.streams.purge(log.config.streamName, { filter: subjects.log(session.sessionId, stream) });
      // The purge just before, with, or just after the replay's classification.
      const before = round % 3 === 0 ? purge() : undefined;
      const sent: string[] = [];
      const replay = store.replayEventsAfter(end!.id, { send: async (id) => void sent.push(id) }).then(
        () => 'resolved',
        (err: unknown) => (isTetherSdkError(err, 'resume_refused') ? `resume_refused/${err.fields.verdict}` : String((err as { code?: unknown }).code ?? err)),
      );
      await (before ?? (round % 3 === 1 ? purge() : Promise.resolve().then(purge)));
      const outcome = await Promise.race([replay, new Promise<string>((resolve) => setTimeout(resolve, 5_000, 'still waiting'))]);
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      expect(sent).toEqual([]);
    }
    expect([...outcomes.keys()].filter((o) => o !== 'resolved' && o !== 'resume_refused/truncated'), JSON.stringify([...outcomes])).toEqual([]);
  }, 120_000);
});
