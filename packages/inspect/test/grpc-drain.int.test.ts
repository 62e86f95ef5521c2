import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, openLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { startMcpUpstream, startNatsServer, startServiceProcess } from '@tether/testing';
import type { McpUpstream, NatsServer, ServiceProcess } from '@tether/testing';
import { runAdmin } from '../src/admin-cli.js';
import { admin, initialize, until } from './admin-stack.js';

/**
 * `tether-admin drain <instance>` reaches gateways in `--log grpc://` mode
 * through their session-log service (WatchAdmin / AnswerAdmin), both over
 * NATS (the bin, as for in-process gateways) and over the operator API
 * (DrainInstance). One real nats-server, one service process, two gRPC-mode
 * gateways and one with the log in-process, all in this process. Each
 * drained gateway must answer ok and then drain as on SIGTERM (its
 * `drained` settles, /readyz stops answering), the others untouched.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../../services/session-log/dist/main.js', import.meta.url));
const CURSOR_TOKEN = 'grpc-drain-cursor-token-0123456789';
const OPERATOR_TOKEN = 'grpc-drain-operator-token-0123456';

let nats: NatsServer;
let service: ServiceProcess;
let upstream: McpUpstream;
let logUrl: string;
const gateways = new Map<string, { gateway: Gateway; url: string }>();

async function startGateway(id: string, extra: readonly string[]): Promise<void> {
  const config = parseConfig(['--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--instance-id', id, '--heartbeat', '1s', ...extra], {});
  const gateway = createGateway(config, await openLog(config), pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
  gateways.set(id, { gateway, url: `http://127.0.0.1:${await gateway.listen()}/mcp` });
}

const ready = (id: string): Promise<number | 'down'> =>
  fetch(`${new URL(gateways.get(id)!.url).origin}/readyz`).then(
    (r) => r.status,
    () => 'down',
  );

const drained = (id: string): Promise<unknown> =>
  Promise.race([gateways.get(id)!.gateway.drained, new Promise((_, reject) => setTimeout(() => reject(new Error(`${id} did not drain`)), 10_000))]);

/** tether-admin in this process, over the operator API. */
async function overGrpc(args: readonly string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runAdmin([...args, '--log', logUrl, '--log-token', OPERATOR_TOKEN], { stdout: (t) => (out += t), stderr: (t) => (err += t), env: {} });
  return { code, out, err };
}

beforeAll(async () => {
  nats = await startNatsServer();
  upstream = await startMcpUpstream({ eventStore: true });
  service = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `gateway:${CURSOR_TOKEN}`, '--operator-token', `ops:${OPERATOR_TOKEN}`, '--instance-id', 'sl-drain'],
    readyLine: (o) => o.msg === 'listening',
  });
  logUrl = `grpc://127.0.0.1:${service.port}`;
  await startGateway('gw-g1', ['--log', logUrl, '--log-token', CURSOR_TOKEN]);
  await startGateway('gw-g2', ['--log', logUrl, '--log-token', CURSOR_TOKEN]);
  await startGateway('gw-local', []);
  // The gRPC-mode gateways' admin watchers are open (the service logs each).
  await until('both admin watchers open', async () => (['gw-g1', 'gw-g2'].every((id) => service.stdoutJson.some((o) => o['msg'] === 'admin watcher open' && o['instance'] === id)) ? true : undefined), 10_000);
}, 60_000);
afterAll(async () => {
  for (const { gateway } of gateways.values()) await gateway.close().catch(() => undefined);
  await service?.stop();
  await upstream?.close();
  await nats?.cleanup();
});

describe('drain of a gateway in --log grpc:// mode', () => {
  it('tether-admin drain <id> over NATS drains it through the session-log service', async () => {
    // It serves before: a session opens on it.
    await initialize(gateways.get('gw-g1')!.url);
    expect(await ready('gw-g1')).toBe(200);
    const run = await admin(['drain', 'gw-g1', '--nats', nats.url, '--json']);
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, instance: 'gw-g1', detail: 'draining' });
    await drained('gw-g1');
    expect(await ready('gw-g1')).toBe('down');
    await expect(initialize(gateways.get('gw-g1')!.url)).rejects.toThrow();
    expect(await ready('gw-g2')).toBe(200);
    expect(await ready('gw-local')).toBe(200);
    // Its watcher ended with it: nobody answers for gw-g1 any more.
    await until('gw-g1 gone from NATS', async () => {
      const again = await admin(['drain', 'gw-g1', '--nats', nats.url, '--timeout', '500', '--json']);
      return again.status === 1 && (JSON.parse(again.stdout) as { error?: { code?: string } }).error?.code === 'instance_not_found' ? true : undefined;
    }, 10_000);
  });

  it('the operator API (DrainInstance) drains it too', async () => {
    expect(await ready('gw-g2')).toBe(200);
    const run = await overGrpc(['drain', 'gw-g2', '--json']);
    expect({ code: run.code, err: run.err, out: run.out }).toEqual({ code: 0, err: '', out: expect.any(String) });
    expect(JSON.parse(run.out)).toMatchObject({ ok: true, instance: 'gw-g2', detail: 'draining' });
    await drained('gw-g2');
    expect(await ready('gw-g2')).toBe('down');
    expect(await ready('gw-local')).toBe(200);
  });

  it('refuses bad instance ids by name, both ways', async () => {
    for (const bad of ['a..b', 'bad id', '.x', 'x.', 'gw-*', 'gw->']) {
      const run = await admin(['drain', bad, '--nats', nats.url]);
      expect({ bad, status: run.status }).toEqual({ bad, status: 2 });
      expect(run.stderr).toMatch(/not an instance id/);
      const grpc = await overGrpc(['drain', bad, '--json']);
      expect({ bad, code: grpc.code }).toEqual({ bad, code: 2 });
      expect(JSON.parse(grpc.out)).toMatchObject({ error: { code: 'invalid_argument', message: expect.stringMatching(/not an instance id/) } });
    }
    // The in-process gateway was never asked anything.
    expect(await ready('gw-local')).toBe(200);
  });
});
