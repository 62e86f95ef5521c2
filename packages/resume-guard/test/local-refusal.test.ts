import { describe, expect, it } from 'vitest';
import { encodeResumeAck } from '@tether/protocol';
import { RESUME_VIOLATION_RPC_CODE, ResumeGuardErrorCode, createResumeGuard } from '@tether/resume-guard';

// The guard's own decisions, against a scripted server: each test names the
// exact answers the server gives, and records every request that reaches it.
// (The zoo tests run the official SDK client and real servers; these pin the
// cases chaos found, which need a precise order of answers.)

const URL_ = 'http://mcp.test/mcp';
const INIT = JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } });

interface Seen {
  readonly method: string;
  readonly sessionId: string | null;
  readonly lastEventId: string | null;
  readonly body: string | undefined;
}

/** A server whose sessions are s1, s2, … and whose answers to everything else come from `answer`. */
function scriptedServer(answer: (req: Seen) => Response | undefined) {
  const seen: Seen[] = [];
  let sessions = 0;
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const headers = new Headers(init?.headers);
    const body = typeof init?.body === 'string' ? init.body : undefined;
    const req = { method: init?.method ?? 'GET', sessionId: headers.get('mcp-session-id'), lastEventId: headers.get('last-event-id'), body };
    seen.push(req);
    if (body?.includes('"initialize"') === true) {
      sessions += 1;
      return new Response(JSON.stringify({ jsonrpc: '2.0', id: 0, result: { protocolVersion: '2025-11-25', capabilities: {}, serverInfo: { name: 's', version: '0' } } }), {
        headers: { 'content-type': 'application/json', 'mcp-session-id': `s${sessions}` },
      });
    }
    if (body?.includes('notifications/initialized') === true) return new Response(null, { status: 202 });
    return answer(req) ?? new Response('unscripted', { status: 500 });
  };
  return { fetch, seen };
}

const sse = (text: string): Response => new Response(text, { headers: { 'content-type': 'text/event-stream' } });
const notFound = (): Response => new Response('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Session not found"}}', { status: 404, headers: { 'content-type': 'application/json' } });
const post = (sessionId: string, body: unknown): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId },
  body: JSON.stringify(body),
});
const resume = (sessionId: string, cursor: string): RequestInit => ({ method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'last-event-id': cursor } });

/**
 * Session s1 gets a POST stream for request 7 (ids a-1, a-2, cut before its
 * result) and a standalone GET stream (id g-1); then s1 is lost (404) and
 * the guard opens s2.
 */
async function replacedSession() {
  const server = scriptedServer((req) => {
    if (req.method === 'POST' && req.sessionId === 's1' && req.body?.includes('"id":7') === true) return sse('id: a-1\ndata:\n\nid: a-2\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n');
    if (req.method === 'GET' && req.sessionId === 's1' && req.lastEventId === null) return sse('id: g-1\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}\n\n');
    if (req.sessionId === 's1') return notFound();
    if (req.method === 'POST' && req.sessionId === 's2') return new Response(null, { status: 202 });
    return undefined;
  });
  const guard = createResumeGuard({ fetch: server.fetch });
  await (await guard.fetch(URL_, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: INIT })).text();
  await (await guard.fetch(URL_, post('s1', { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'x' } }))).text();
  await (await guard.fetch(URL_, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': 's1' } })).text();
  // Any request to s1 now finds it gone: the guard opens s2 and retries there.
  const after = await guard.fetch(URL_, post('s1', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }));
  expect(after.status).toBe(202);
  expect(guard.currentSessionId('s1')).toBe('s2');
  return { guard, server };
}

describe('resumes the guard answers itself', () => {
  it("never sends the replaced session's cursor under the new session id (the server would end the new session)", async () => {
    const { guard, server } = await replacedSession();
    const before = server.seen.length;
    // The SDK's GET loop kept its cursor and adopted the new session id.
    const res = await guard.fetch(URL_, resume('s2', 'g-1'));
    expect(res.status).toBe(404);
    expect(await res.text()).toContain('belongs to a session that was replaced');
    expect(server.seen.slice(before)).toEqual([]);
  });

  it('fails the requests still pending on a stream of the replaced session once, then answers 404', async () => {
    const { guard, server } = await replacedSession();
    const before = server.seen.length;
    for (const sessionId of ['s1', 's2']) {
      const first = await guard.fetch(URL_, resume(sessionId, 'a-2'));
      if (sessionId === 's1') {
        // The first resume of the stream carries request 7's error, so the call ends now, not at its timeout.
        expect(first.status).toBe(200);
        expect(first.headers.get('mcp-session-id')).toBe('s2');
        const text = await first.text();
        // It repeats the cursor, so the SDK's reconnection carries it (and is refused here) instead of opening a stray GET.
        expect(text).toMatch(/^id: a-2$/m);
        const message = JSON.parse(/^data: (.*)$/m.exec(text)?.[1] ?? 'null') as { id: number; error: { code: number; data: { code: string } } };
        expect(message.id).toBe(7);
        expect(message.error.code).toBe(RESUME_VIOLATION_RPC_CODE);
        expect(message.error.data.code).toBe(ResumeGuardErrorCode.sessionReplaced);
      } else {
        expect(first.status).toBe(404);
      }
    }
    expect(server.seen.slice(before)).toEqual([]);
  });

  it('still sends cursors of the current session, and cursors it never saw, to the server', async () => {
    const { guard, server } = await replacedSession();
    const before = server.seen.length;
    await guard.fetch(URL_, resume('s2', 'x-9')).then((r) => r.text());
    expect(server.seen.slice(before)).toMatchObject([{ method: 'GET', sessionId: 's2', lastEventId: 'x-9' }]);
  });
});

describe('the resume acknowledgment of a resume', () => {
  it('reaches the client even when the response breaks right after it (the SDK keeps only ids it sees)', async () => {
    const server = scriptedServer((req) => {
      if (req.method === 'POST' && req.body?.includes('"id":3') === true) return sse('id: e-1-1-1\ndata:\n\nid: e-1-2-2\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n');
      if (req.method === 'GET' && req.lastEventId === 'e-1-2-2') {
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(encodeResumeAck({ cursor: 'e-1-2-2', stream: '1', nextSeq: 3 })));
            setTimeout(() => controller.error(new Error('connection cut')), 20);
          },
        });
        return new Response(body, { headers: { 'content-type': 'text/event-stream', 'tether-resume': 'resumed' } });
      }
      return undefined;
    });
    const guard = createResumeGuard({ fetch: server.fetch });
    await (await guard.fetch(URL_, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: INIT })).text();
    await (await guard.fetch(URL_, post('s1', { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'x' } }))).text();
    const res = await guard.fetch(URL_, resume('s1', 'e-1-2-2'));
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let received = '';
    let failure: unknown;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        received += new TextDecoder().decode(value);
      }
    } catch (err) {
      failure = err;
    }
    expect(received).toContain('id: e-1-2-2\nevent: resume\n');
    expect(String(failure)).toContain('connection cut');
  });
});

describe('a transient answer to a resume', () => {
  it('is passed on for the client to retry, even with a Tether-Resume header: no violation, no new session', async () => {
    const server = scriptedServer((req) => {
      if (req.method === 'POST' && req.body?.includes('"id":3') === true) return sse('id: e-1-1-1\ndata:\n\n');
      if (req.method === 'GET' && req.lastEventId === 'e-1-1-1') return new Response('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"draining"}}', { status: 503, headers: { 'content-type': 'application/json', 'tether-resume': 'draining' } });
      return undefined;
    });
    const violations: string[] = [];
    const guard = createResumeGuard({ fetch: server.fetch, onViolation: (e) => void violations.push(e.code) });
    await (await guard.fetch(URL_, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: INIT })).text();
    await (await guard.fetch(URL_, post('s1', { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'x' } }))).text();
    const res = await guard.fetch(URL_, resume('s1', 'e-1-1-1'));
    expect(res.status).toBe(503);
    expect(violations).toEqual([]);
    expect(guard.currentSessionId('s1')).toBe('s1');
  });
});

describe('a resume refused 401 (an expired token)', () => {
  it('puts its cursor back on the next GET without one, which the SDK v1 client sends after re-authenticating', async () => {
    let resumed = 0;
    const server = scriptedServer((req) => {
      if (req.method === 'POST' && req.body?.includes('"id":7') === true) return sse('id: a-1\ndata:\n\nid: a-2\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n');
      if (req.method === 'GET' && req.lastEventId === 'a-2' && resumed++ === 0) return new Response('{}', { status: 401, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });
      if (req.method === 'GET' && req.lastEventId === 'a-2') return sse(`${encodeResumeAck({ cursor: 'a-2', stream: '1', nextSeq: 3 })}id: a-3\ndata: {"jsonrpc":"2.0","id":7,"result":{}}\n\n`);
      return undefined;
    });
    const guard = createResumeGuard({ fetch: server.fetch });
    await (await guard.fetch(URL_, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: INIT })).text();
    await (await guard.fetch(URL_, post('s1', { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'x' } }))).text();
    const refused = await guard.fetch(URL_, resume('s1', 'a-2'));
    expect(refused.status).toBe(401);
    // The SDK's retry after `auth()`: the same stream, its cursor dropped.
    const retry = await guard.fetch(URL_, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': 's1' } });
    expect(retry.status).toBe(200);
    expect(await retry.text()).toContain('"id":7');
    expect(server.seen.at(-1)?.lastEventId).toBe('a-2');
    // Only once: a later GET without a cursor opens the standalone stream as it asked.
    await guard.fetch(URL_, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': 's1' } });
    expect(server.seen.at(-1)?.lastEventId).toBeNull();
  });
});
