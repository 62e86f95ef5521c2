import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, openLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { openInspectAccess, readSessionAudit, readTimeline, sessionTag } from '@tether/inspect';
import type { InspectAccess } from '@tether/inspect';
import type { AuditEvent } from '@tether/session-log';
import { startMcpUpstream, startNatsServer, startServiceProcess } from '@tether/testing';
import type { McpUpstream, NatsServer, ServiceProcess } from '@tether/testing';
import { callProgress, initialize, readEvents, resume, until, VERSION } from './admin-stack.js';

/**
 * A gateway in `--log grpc://` mode records the same audit events as one
 * with the log in-process: RecordAudit on the session-log service (a real
 * process) instead of a core publish. One real nats-server, one service
 * process, one in-process gateway of each mode on the same upstream; the
 * events are read back as tether-inspect reads them.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../../services/session-log/dist/main.js', import.meta.url));
const TOKEN = 'grpc-audit-test-token-0123456789';

let nats: NatsServer;
let service: ServiceProcess;
let upstream: McpUpstream;
let access: InspectAccess;
const gateways = new Map<string, { gateway: Gateway; url: string }>();

async function startGateway(id: string, extra: readonly string[]): Promise<void> {
  const config = parseConfig(['--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--instance-id', id, '--heartbeat', '1s', ...extra], {});
  const gateway = createGateway(config, await openLog(config), pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
  gateways.set(id, { gateway, url: `http://127.0.0.1:${await gateway.listen()}/mcp` });
}

beforeAll(async () => {
  nats = await startNatsServer();
  upstream = await startMcpUpstream({ eventStore: true });
  service = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `gateway:${TOKEN}`, '--instance-id', 'sl-1'],
    readyLine: (o) => o.msg === 'listening',
  });
  await startGateway('gw-local', []);
  await startGateway('gw-grpc', ['--log', `grpc://127.0.0.1:${service.port}`, '--log-token', TOKEN]);
  access = await openInspectAccess({ servers: nats.url });
}, 60_000);
afterAll(async () => {
  await access?.close();
  for (const { gateway } of gateways.values()) await gateway.close().catch(() => undefined);
  await service?.stop();
  await upstream?.close();
  await nats?.cleanup();
});

/**
 * On one gateway: an initialize, a tool call read to its end (POST), a GET
 * of the standalone stream left at once, and a resume with a cursor of
 * another epoch (refused `epoch_mismatch`, 404, the session closed).
 */
async function scenario(url: string): Promise<{ sessionId: string; stream: string }> {
  const sessionId = await initialize(url);
  const events = await readEvents(await callProgress(url, sessionId, 3, 0));
  const [, stream, seq, pos] = events[events.length - 1]!.id!.split('-');
  const get = new AbortController();
  const fresh = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION }, signal: get.signal });
  expect(fresh.status).toBe(200);
  get.abort();
  const refused = await resume(url, sessionId, `aaaaaaaaaa-${stream}-${seq}-${pos}`);
  await refused.arrayBuffer();
  expect(refused.status).toBe(404);
  return { sessionId, stream: stream! };
}

/** The session's audit events once its close and both deliveries' ends (POST and GET) are stored. */
function settled(sessionId: string): Promise<AuditEvent[]> {
  return until(
    `the audit events of ${sessionTag(sessionId)}`,
    async () => {
      const events = await readSessionAudit(access, sessionId);
      return events.some((e) => e.kind === 'close') && events.filter((e) => e.kind === 'delivered').length >= 2 ? events : undefined;
    },
    10_000,
  );
}

/** What must match between the modes: kinds (with counts), and each event's shape without times, ids or positions. */
function shapeOf(events: readonly AuditEvent[], stream: string): string[] {
  // Stream ids are random: the tool call's is `POST`, the initialize's `other`.
  const name = (s: string | undefined): string | undefined => (s === undefined || s === '0' ? s : s === stream ? 'POST' : 'other');
  return events
    .map((e) => JSON.stringify({ kind: e.kind, stream: name(e.stream), verdict: e.verdict, status: e.status, cursor: name(e.cursor?.stream), reason: e.kind === 'delivered' ? undefined : e.reason, writer: e.writer === undefined ? undefined : 'w', from: e.from === undefined ? undefined : 'w' }))
    .sort();
}

describe('audit events of a gateway in --log grpc:// mode', () => {
  it('records the same kinds, verdicts and statuses as in-process for a POST, a GET and a refused resume', async () => {
    const local = await scenario(gateways.get('gw-local')!.url);
    const grpc = await scenario(gateways.get('gw-grpc')!.url);
    const localEvents = await settled(local.sessionId);
    const grpcEvents = await settled(grpc.sessionId);

    expect(localEvents.every((e) => e.instance === 'gw-local')).toBe(true);
    // The gateway records its own (tether-audit: self): none of the service's are added.
    expect(grpcEvents.every((e) => e.instance === 'gw-grpc')).toBe(true);
    expect(new Set(grpcEvents.map((e) => e.kind))).toEqual(new Set(['initialize', 'post', 'get', 'claim', 'delivered', 'resume', 'close']));
    expect(shapeOf(grpcEvents, grpc.stream)).toEqual(shapeOf(localEvents, local.stream));
    const refusal = grpcEvents.find((e) => e.kind === 'resume');
    expect(refusal).toMatchObject({ verdict: 'epoch_mismatch', status: 404, cursor: { stream: grpc.stream } });
    // A delivery's request and its end share a conn id, over gRPC too.
    const conns = grpcEvents.filter((e) => e.kind === 'delivered').map((e) => e.conn);
    for (const conn of conns) expect(grpcEvents.some((e) => e.kind !== 'delivered' && e.conn === conn)).toBe(true);
    // Metadata only: no session id, no raw event id.
    expect(JSON.stringify(grpcEvents)).not.toContain(grpc.sessionId);
    expect(JSON.stringify(grpcEvents)).not.toMatch(/[a-z2-7]{10}-[0-9a-z]+-\d+-\d+/);

    // The inspector's timeline draws the gRPC session's connections and its refusal.
    const timeline = await readTimeline(access, sessionTag(grpc.sessionId));
    expect(timeline.connections.map((c) => c.kind)).toEqual(expect.arrayContaining(['initialize', 'post', 'get', 'resume']));
    expect(timeline.connections.find((c) => c.kind === 'resume')).toMatchObject({ instance: 'gw-grpc', verdict: 'epoch_mismatch', status: 404 });
    expect(timeline.endedAtMs).toBeGreaterThan(0);
  });
});
