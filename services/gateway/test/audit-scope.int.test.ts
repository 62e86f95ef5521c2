import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { encodeEventId } from '@tether/protocol';
import type { AuditEvent } from '@tether/session-log';
import { readAudit } from './audit-reader.js';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';
import { initialize, request } from './e2e/raw-client.js';

/**
 * Issue 31, item 1: a GET resume records its audit event only into a
 * session of the caller's. Another principal naming a session in
 * `Mcp-Session-Id` (with any cursor) or a session id nobody opened leaves
 * nothing under that id. A real gateway on a real nats-server (`--auth
 * none`: the Authorization header is the principal), audit read back from
 * the log stream.
 */
let stack: InProcessStack;
let nc: NatsConnection;
let jsm: JetStreamManager;
let url: string;
const alice = { authorization: 'Bearer alice-0123456789' };
const mallory = { authorization: 'Bearer mallory-0123456789' };
/** A cursor that decodes (so the resume is classified past `malformed`); what it names does not matter here. */
const someCursor = encodeEventId({ epoch: 'aaaaaaaaaa', stream: '0', seq: 1, pos: 1 });

beforeAll(async () => {
  stack = await startInProcessStack();
  url = stack.urls[0]!;
  nc = await connect({ servers: stack.nats.url });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  await nc?.close();
  await stack?.teardown();
});

/** Every audit event stored under `sessionId` (`<prefix>.audit.<session>` in the log stream). */
function auditOf(sessionId: string): Promise<AuditEvent[]> {
  return readAudit(nc, jsm, stack.streamName, `*.audit.${sessionId}`);
}

const refusalsIn = (events: AuditEvent[]): string[] => events.filter((e) => e.kind === 'resume').map((e) => `${e.verdict}:${e.status}`);

async function get(sessionId: string, lastEventId: string, headers: Record<string, string>): Promise<number> {
  const res = await request(url, { method: 'GET', sessionId, lastEventId, headers });
  await res.json().catch(() => undefined);
  return res.status;
}

describe('GET resume audit events', () => {
  it("go into the caller's own session only: another principal's resume of it, with any cursor, records nothing there", async () => {
    const sessionId = await initialize(url, alice);
    expect(await get(sessionId, someCursor, mallory)).toBe(404);
    expect(await get(sessionId, 'not-an-event-id', mallory)).toBe(400);
    // Alice's own malformed cursor is still recorded: the marker that the
    // calls before it were done (one connection publishes in order).
    expect(await get(sessionId, 'not-an-event-id', alice)).toBe(400);
    await expect.poll(async () => refusalsIn(await auditOf(sessionId)), { timeout: 5_000 }).toContain('malformed:400');
    expect(refusalsIn(await auditOf(sessionId))).toEqual(['malformed:400']);
  });

  it('record nothing under a session id nobody opened', async () => {
    const unknown = randomBytes(16).toString('base64url');
    expect(await get(unknown, someCursor, mallory)).toBe(404);
    expect(await get(unknown, 'not-an-event-id', mallory)).toBe(400);
    // A marker in a session of the same connection: once it is stored, so would the two above be.
    const marker = await initialize(url, alice);
    expect(await get(marker, 'not-an-event-id', alice)).toBe(400);
    await expect.poll(async () => refusalsIn(await auditOf(marker)), { timeout: 5_000 }).toEqual(['malformed:400']);
    expect(await auditOf(unknown)).toEqual([]);
  });
});
