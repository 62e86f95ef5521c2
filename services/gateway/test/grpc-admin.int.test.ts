import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { pino } from 'pino';
import type { NatsConnection } from '@nats-io/transport-node';
import { createSubjects, namespaceNames } from '@tether/session-log';
import type { AdminAnswer, AdminRequest } from '@tether/session-log';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';
import { createGrpcLog } from '../src/log/grpc-log.js';
import { createLocalLog } from '../src/log/local-log.js';
import type { LogPort } from '../src/log/log-port.js';

/**
 * LogPort.listenAdmin in both modes: an operator request on
 * `<prefix>.admin.<instance>` (what tether-admin sends; over gRPC the
 * instance's address, which the log logs) reaches the listener and its
 * answer reaches the requester; over gRPC through the session-log service
 * (a real process), also after the service restarts.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../session-log/dist/main.js', import.meta.url));
const TOKEN = 'gateway-admin-test-token-0123456789';
const subjects = createSubjects(namespaceNames('').subjectPrefix);

let nats: NatsServer;
let service: ServiceProcess;
let nc: NatsConnection;
const ports: LogPort[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
  service = await startSessionLogProcess();
  nc = await connect({ servers: nats.url });
});
afterAll(async () => {
  for (const port of ports) await port.close();
  await nc?.close();
  await service?.stop();
  await nats?.cleanup();
});

function startSessionLogProcess(port = 0): Promise<ServiceProcess> {
  return startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', String(port), '--nats', nats.url, '--token', `gateway:${TOKEN}`],
    readyLine: (o) => o.msg === 'listening',
  });
}

async function open(factory: () => Promise<LogPort>): Promise<LogPort> {
  const port = await factory();
  ports.push(port);
  return port;
}

/** Asks until someone answers (a listener over gRPC subscribes asynchronously). */
async function ask(instance: string, timeoutMs = 10_000): Promise<AdminAnswer> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return (await nc.request(subjects.admin(instance), JSON.stringify({ type: 'drain', from: 'tether-admin' }), { timeout: 1_000 })).json<AdminAnswer>();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** The log's lines (a real pino logger): over gRPC it logs the address operators reach the instance by. */
const lines: Record<string, unknown>[] = [];
const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });

/** Where tether-admin reaches `instance`: itself in-process; over gRPC the address the log logged. */
async function addressOf(mode: string, instance: string): Promise<string> {
  if (!mode.startsWith('grpc')) return instance;
  let found: string | undefined;
  await expect.poll(() => (found = lines.find((l) => l['msg'] === 'admin requests reach this instance at its address' && l['instance'] === instance)?.['address'] as string | undefined), { timeout: 10_000 }).toBeDefined();
  expect(found).toMatch(new RegExp(`^grpc\\.[A-Za-z0-9_-]{22}\\.${instance.replace('.', '\\.')}$`));
  return found!;
}

const modes: [string, () => Promise<LogPort>][] = [
  ['local (JetStream in-process)', () => createLocalLog({ servers: nats.url })],
  ['grpc (session-log service)', () => createGrpcLog({ target: `127.0.0.1:${service.port}`, token: TOKEN, logger })],
];

describe.each(modes)('listenAdmin: %s', (mode, factory) => {
  it('passes a drain request on and answers the requester, until it stops listening', async () => {
    const log = await open(factory);
    const instance = `gw-${mode.startsWith('grpc') ? 'g' : 'l'}.admin`;
    const heard: AdminRequest[] = [];
    const stop = log.listenAdmin(instance, (request, reply) => {
      heard.push(request);
      reply({ ok: true, instance, detail: `heard ${heard.length}` });
    });
    const address = await addressOf(mode, instance);
    expect(await ask(address)).toEqual({ ok: true, instance, detail: 'heard 1' });
    expect(heard).toEqual([{ type: 'drain', from: 'tether-admin' }]);
    stop();
    await expect.poll(() => nc.request(subjects.admin(address), JSON.stringify({ type: 'drain' }), { timeout: 500 }).then(() => 'answered', (err: unknown) => String(err)), { timeout: 5_000 }).toMatch(/no responders|503/i);
  });
});

describe('listenAdmin over gRPC only', () => {
  it('listens again after the service restarts', async () => {
    const log = await open(() => createGrpcLog({ target: `127.0.0.1:${service.port}`, token: TOKEN, logger }));
    const stop = log.listenAdmin('gw-restart', (_request, reply) => reply({ ok: true, instance: 'gw-restart', detail: 'draining' }));
    const address = await addressOf('grpc', 'gw-restart');
    expect(await ask(address)).toMatchObject({ ok: true });
    const port = service.port!;
    await service.kill();
    service = await startSessionLogProcess(port);
    expect(await ask(address, 20_000)).toEqual({ ok: true, instance: 'gw-restart', detail: 'draining' });
    stop();
  });
});
