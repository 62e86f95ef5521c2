import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, startFleet } from './router-fixtures.js';
import type { Fleet, Instance, SdkMajor } from './router-fixtures.js';

// The error paths of sessions served by any instance: what a client gets for
// a cursor that is not Tether's, a cursor of another session, and a session
// of another principal. Raw fetch on purpose: these are inputs an SDK client
// would not make.

let fleet: Fleet;
beforeAll(async () => {
  fleet = await startFleet();
});
afterAll(async () => {
  await fleet?.teardown();
});

const ALICE = 'Bearer alice';
const MALLORY = 'Bearer mallory';

/** The id of the first frame of a fresh GET: the head of the session's stream `0`, a real cursor of that session. */
async function primingId(url: string, sessionId: string, authorization: string): Promise<string> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, authorization, 'mcp-protocol-version': '2025-11-25' }, signal: abort.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  abort.abort();
  const id = /^id: (.+)$/m.exec(text)?.[1];
  expect(id).toBeDefined();
  return id!;
}

function resume(url: string, sessionId: string, authorization: string, lastEventId: string): Promise<Response> {
  return fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, authorization, 'last-event-id': lastEventId } });
}

// Each SDK major on the unpartitioned log and on 4 partitions (issue 24).
describe.each([
  ['v1', 1],
  ['v1', 4],
  ['v2', 1],
  ['v2', 4],
] as const)('SDK %s: refusals, log on %i partition(s)', (major: SdkMajor, partitions: number) => {
  let instances: Instance[];
  beforeAll(async () => {
    instances = await fleet.start(major, 2, partitions);
  });

  it('a malformed Last-Event-ID is a 400 naming what is wrong, not an empty 200', async () => {
    const url = `${instances[0]!.url}/mcp`;
    const client = await connectClient(major, url, ALICE);
    try {
      const res = await resume(`${instances[1]!.url}/mcp`, client.sessionId!, ALICE, 'not-a-tether-id');
      expect(res.status).toBe(400);
      expect(res.headers.get('tether-resume')).toBe('malformed');
      const body = (await res.json()) as { error: { message: string; data: { verdict: string } } };
      expect(body.error.data.verdict).toBe('malformed');
      expect(body.error.message).toMatch(/Last-Event-ID is malformed: event id has 4 '-'-separated fields|malformed/);
    } finally {
      await client.close();
    }
  });

  it("another session's cursor is refused with its verdict and never yields that session's events", async () => {
    const url = `${instances[0]!.url}/mcp`;
    const alice = await connectClient(major, url, ALICE);
    const other = await connectClient(major, url, ALICE);
    try {
      const foreign = await primingId(url, other.sessionId!, ALICE);
      const own = await primingId(url, alice.sessionId!, ALICE);
      const res = await resume(`${instances[1]!.url}/mcp`, alice.sessionId!, ALICE, foreign);
      expect(res.status).toBe(404);
      expect(res.headers.get('tether-resume')).toBe('epoch_mismatch');
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/resume refused \(epoch_mismatch\): the cursor belongs to another incarnation/);
      // The session's own cursor is accepted on the other instance: the refusal above was about the cursor.
      const ok = await resume(`${instances[1]!.url}/mcp`, alice.sessionId!, ALICE, own);
      expect(ok.status).toBe(200);
      expect(ok.headers.get('tether-resume')).toBe('resumed');
      await ok.body?.cancel();
    } finally {
      await alice.close();
      await other.close();
    }
  });

  it("another principal's session answers exactly like an unknown session", async () => {
    const url = `${instances[0]!.url}/mcp`;
    const alice = await connectClient(major, url, ALICE);
    try {
      const post = (sessionId: string, authorization: string): Promise<Response> =>
        fetch(`${instances[1]!.url}/mcp`, {
          method: 'POST',
          headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': sessionId, authorization },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
        });
      const mismatch = await post(alice.sessionId!, MALLORY);
      const unknown = await post('AAAAAAAAAAAAAAAAAAAAAA', MALLORY);
      expect(mismatch.status).toBe(404);
      expect(unknown.status).toBe(404);
      expect(await mismatch.text()).toBe(await unknown.text());
      const own = await primingId(url, alice.sessionId!, ALICE);
      const stolen = await resume(`${instances[1]!.url}/mcp`, alice.sessionId!, MALLORY, own);
      expect(stolen.status).toBe(404);
      expect(stolen.headers.get('tether-resume')).toBeNull();
      // Alice still works: a refused stranger changes nothing.
      expect(await alice.ping()).toBe('pong');
    } finally {
      await alice.close();
    }
  });

  it('DELETE on one instance ends the session on every instance', async () => {
    const alice = await connectClient(major, `${instances[0]!.url}/mcp`, ALICE);
    const sessionId = alice.sessionId!;
    expect(await alice.ping()).toBe('pong');
    // Make sure the second instance holds state for the session too.
    const warm = await fetch(`${instances[1]!.url}/mcp`, {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': sessionId, authorization: ALICE, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
    });
    expect(warm.status).toBe(200);
    await warm.text();
    const del = await fetch(`${instances[0]!.url}/mcp`, { method: 'DELETE', headers: { 'mcp-session-id': sessionId, authorization: ALICE } });
    expect(del.status).toBe(200);
    const after = await fetch(`${instances[1]!.url}/mcp`, {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': sessionId, authorization: ALICE },
      body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
    await alice.close();
  });
});
