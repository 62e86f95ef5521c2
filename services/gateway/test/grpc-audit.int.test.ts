import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import type { AuditEvent } from '@tether/session-log';
import { readAudit } from './audit-reader.js';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';
import { createGrpcLog } from '../src/log/grpc-log.js';
import type { LogPort } from '../src/log/log-port.js';

/**
 * Issue 31, item 2, end to end: a gateway on `--log grpc://` batches audit
 * events (RecordAuditBatch); one of them naming a session that is not its
 * caller's no longer takes the batch's others down. Two callers (tokens)
 * of a real session-log process on a real nats-server; the gateway's log
 * reports the refusal on a real pino logger, as a count.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../session-log/dist/main.js', import.meta.url));
const TOKENS = { a: 'gateway-a-token-0123456789', b: 'gateway-b-token-0123456789' } as const;

let nats: NatsServer;
let service: ServiceProcess;
let nc: NatsConnection;
let jsm: JetStreamManager;
const ports: LogPort[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
  service = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url],
    env: { TETHER_GRPC_TOKENS: `gw-a:${TOKENS.a},gw-b:${TOKENS.b}` },
    readyLine: (o) => o.msg === 'listening',
  });
  nc = await connect({ servers: nats.url });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  for (const port of ports) await port.close();
  await nc?.close();
  await service?.stop();
  await nats?.cleanup();
});

async function open(token: string, logger?: pino.Logger): Promise<LogPort> {
  const port = await createGrpcLog({ target: `127.0.0.1:${service.port}`, token, ...(logger === undefined ? {} : { logger }) });
  ports.push(port);
  return port;
}

/** The audit events stored under a session, in order (the service's default names: TETHER_LOG, `tether.audit.<session>`). */
function auditOf(sessionId: string): Promise<AuditEvent[]> {
  return readAudit(nc, jsm, 'TETHER_LOG', `tether.audit.${sessionId}`);
}

const event = (reason: string): AuditEvent => ({ v: 1, atMs: Date.now(), instance: 'gw-audit', kind: 'post', status: 200, reason });

describe('audit events over gRPC, batched', () => {
  it("one naming another caller's session is refused alone: the batch's others are stored, and the refusal is logged as a count", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const a = await open(TOKENS.a, logger);
    const b = await open(TOKENS.b);
    const mine = (await a.createSession('u', {})).sessionId;
    const theirs = (await b.createSession('u', {})).sessionId;
    // One batch (the batcher waits 5 ms): two of A's own events around one into B's session.
    a.audit(mine, event('first'));
    a.audit(theirs, event('foreign'));
    a.audit(mine, event('last'));
    await expect.poll(async () => (await auditOf(mine)).map((e) => e.reason), { timeout: 5_000 }).toEqual(['first', 'last']);
    // The batch was answered, so its refusal is known; close() flushes the log's count.
    await a.close();
    ports.splice(ports.indexOf(a), 1);
    expect(lines.filter((l) => l['msg'] === 'audit events refused by the session-log service').map((l) => [l['refused'], l['byCode']])).toEqual([[1, { session_not_found: 1 }]]);
    // Never the session id.
    expect(JSON.stringify(lines)).not.toContain(theirs);
    expect((await auditOf(theirs)).filter((e) => e.instance === 'gw-audit')).toEqual([]);
  });
});
