import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { principalDigest, SessionLog } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { createWriterPresence, isTetherSdkError, requestsOfTransport, SDK_GET_STREAM, TetherEventStore } from '@tether/sdk';
import type { SdkTransport, WriterPresence } from '@tether/sdk';
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
