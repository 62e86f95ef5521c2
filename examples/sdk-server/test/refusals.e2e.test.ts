import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpHeader } from '@tether/protocol';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { connectClient } from './clients.js';
import type { SdkMajor, TestClient } from './clients.js';
import { startFleet } from './fleet.js';
import type { Fleet } from './fleet.js';

// The error paths across real processes: another principal, a cursor of
// another session, a cursor that does not parse. Each one is an error status
// the SDK client reports (a rejected call, or `onerror` for a resume), and
// never an event of another session.

let nats: NatsServer;
let fleet: Fleet;
const clients: TestClient[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
  fleet = await startFleet(nats, 3, 'refuse');
});
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => undefined);
  await fleet?.close();
  await nats?.cleanup();
});

const ALICE = 'Bearer alice';
const BOB = 'Bearer bob';

async function client(major: SdkMajor, authorization: string, sessionId?: string): Promise<TestClient> {
  const c = await connectClient(major, fleet.url, { authorization, ...(sessionId === undefined ? {} : { sessionId }) });
  clients.push(c);
  return c;
}

/** A cursor of Alice's first session: the id of a progress event of a finished `stream` call there. */
async function cursorOf(c: TestClient): Promise<string> {
  const tokens: string[] = [];
  expect(await c.call('stream', { count: 5, delayMs: 0 }, { onProgress: () => undefined, onResumptionToken: (t) => tokens.push(t) })).toBe('streamed 5');
  const token = tokens.at(2);
  expect(token, `tokens: ${JSON.stringify(tokens)}`).toBeDefined();
  return token!;
}

/** A resume through the SDK (`resumptionToken`): the SDK reports the refusal on `onerror`; no progress reaches the call. */
async function refusedResume(c: TestClient, cursor: string): Promise<{ error: Error; progress: number[] }> {
  const progress: number[] = [];
  const abort = new AbortController();
  const error = new Promise<Error>((resolve) => c.onError(resolve));
  const call = c.call('stream', { count: 5, delayMs: 0 }, { resumptionToken: cursor, onProgress: (p) => progress.push(p), signal: abort.signal });
  call.catch(() => undefined);
  const first = await Promise.race([error, call.then((text) => new Error(`the resume answered: ${text}`))]);
  abort.abort();
  return { error: first, progress };
}

/** The HTTP status an SDK transport error carries: v1 `StreamableHTTPError.code`, v2 `SdkHttpError.status`. */
function httpStatusOf(err: Error): unknown {
  const e = err as { code?: unknown; status?: unknown };
  return typeof e.status === 'number' ? e.status : e.code;
}

/** The same resume as raw HTTP, to read the status, the verdict and the body. */
async function rawResume(sessionId: string, cursor: string, authorization: string): Promise<{ status: number; verdict: string | null; body: string }> {
  const response = await fetch(fleet.url, {
    headers: { accept: 'text/event-stream', authorization, [HttpHeader.sessionId]: sessionId, [HttpHeader.lastEventId]: cursor, [HttpHeader.protocolVersion]: '2025-11-25' },
  });
  return { status: response.status, verdict: response.headers.get(HttpHeader.tetherResume), body: await response.text() };
}

describe.each(['v1', 'v2'] as const)('SDK %s client', (major) => {
  it('another principal presenting Alice\'s session id: 404 Session not found on every instance, nothing of hers', async () => {
    const alice = await client(major, ALICE);
    const sessionId = alice.sessionId!;
    const cursor = await cursorOf(alice);
    const bob = await client(major, BOB, sessionId);
    for (let i = 0; i < 3; i += 1) await expect(bob.call('ping', {})).rejects.toThrow(/404|session not found/i);
    const resumed = await refusedResume(bob, cursor);
    expect(httpStatusOf(resumed.error), resumed.error.message).toBe(404);
    expect(resumed.progress).toEqual([]);
    for (let i = 0; i < 3; i += 1) {
      const raw = await rawResume(sessionId, cursor, BOB);
      expect(raw.status).toBe(404);
      expect(JSON.parse(raw.body)).toEqual({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    }
    // Alice's session is untouched.
    expect(await alice.call('ping', {})).toBe('pong');
  });

  it('a cursor of another session of the same principal is refused with a verdict, never replayed', async () => {
    const first = await client(major, ALICE);
    const foreign = await cursorOf(first);
    const second = await client(major, ALICE);
    const { error, progress } = await refusedResume(second, foreign);
    expect(httpStatusOf(error), error.message).toBe(404);
    expect(progress).toEqual([]);
    for (let i = 0; i < 3; i += 1) {
      const raw = await rawResume(second.sessionId!, foreign, ALICE);
      expect(raw.status).toBe(404);
      expect(raw.verdict).not.toBeNull();
      expect(raw.verdict).not.toBe('resumed');
      expect(raw.body).not.toContain('progress');
    }
    expect(await second.call('ping', {})).toBe('pong');
  });

  it('a malformed cursor: 400 malformed, through the SDK and raw', async () => {
    const alice = await client(major, ALICE);
    const { error, progress } = await refusedResume(alice, 'not-a-cursor');
    expect(httpStatusOf(error), error.message).toBe(400);
    expect(progress).toEqual([]);
    const raw = await rawResume(alice.sessionId!, 'not-a-cursor', ALICE);
    expect(raw.status).toBe(400);
    expect(raw.verdict).toBe('malformed');
    expect(await alice.call('ping', {})).toBe('pong');
  });
});
