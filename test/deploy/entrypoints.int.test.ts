/**
 * The scripts the images run, run for real (outside a container):
 * deploy/demo-upstream/server.mjs (the compose demo upstream) and
 * deploy/docker/healthcheck.mjs (the images' HEALTHCHECK and compose health
 * checks) against a real gateway and a real session-log service.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectSdkClient, getFreePort, startNatsServer, startServiceProcess, UpstreamTools } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';
import { GATEWAY_MAIN, REPO, SESSION_LOG_MAIN, deployPath } from './deploy-files.js';

const HEALTHCHECK = deployPath('docker/healthcheck.mjs');

/** Runs healthcheck.mjs like Docker does: exit code, plus stderr for the message. */
function healthcheck(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [HEALTHCHECK, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

describe('deploy/demo-upstream/server.mjs', () => {
  let demo: ServiceProcess;
  beforeAll(async () => {
    demo = await startServiceProcess({
      name: 'demo-upstream',
      command: process.execPath,
      args: [deployPath('demo-upstream/server.mjs')],
      cwd: REPO,
      env: { DEMO_UPSTREAM_HOST: '127.0.0.1', DEMO_UPSTREAM_PORT: '0' },
      readyLine: (json) => json.msg === 'listening',
    });
  });
  afterAll(async () => {
    await demo?.stop('SIGKILL', 2_000).catch(() => undefined);
  });

  it('serves the SDK demo server on /mcp (tools, SSE progress streamed through its front) and /healthz', async () => {
    const origin = `http://127.0.0.1:${demo.port}`;
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    expect(await healthcheck(['http', `${origin}/healthz`])).toEqual({ code: 0, stderr: '' });
    const sdk = await connectSdkClient(`${origin}/mcp`);
    const tools = await sdk.client.listTools();
    expect(tools.tools.map((t) => t.name).sort()).toEqual(Object.values(UpstreamTools).sort());
    const progress: number[] = [];
    const result = await sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 5, delayMs: 2 } }, CallToolResultSchema, { onprogress: (p) => void progress.push(p.progress) });
    expect(progress).toEqual([1, 2, 3, 4, 5]);
    expect(result.content).toEqual([{ type: 'text', text: 'done 5' }]);
    await sdk.transport.terminateSession();
    await sdk.close();
  });

  it('stops cleanly on SIGTERM', async () => {
    const exit = await demo.stop('SIGTERM', 5_000);
    expect(exit.code).toBe(0);
  });
});

describe('deploy/docker/healthcheck.mjs', () => {
  let nats: NatsServer;
  let gateway: ServiceProcess;
  let sessionLog: ServiceProcess;
  beforeAll(async () => {
    nats = await startNatsServer();
    gateway = await startServiceProcess({
      name: 'gateway',
      command: process.execPath,
      args: [`${REPO}${GATEWAY_MAIN}`, '--port', '0', '--nats', nats.url, '--upstream', 'http://127.0.0.1:9/mcp'],
      readyLine: (json) => json.msg === 'listening',
    });
    sessionLog = await startServiceProcess({
      name: 'session-log',
      command: process.execPath,
      args: [`${REPO}${SESSION_LOG_MAIN}`, '--port', '0', '--nats', nats.url],
      readyLine: (json) => json.msg === 'listening',
    });
  });
  afterAll(async () => {
    await Promise.all([gateway, sessionLog].map((p) => p?.stop('SIGKILL', 2_000).catch(() => undefined)));
    await nats?.cleanup();
  });

  it('http: healthy when the gateway at $TETHER_PORT answers /readyz 200, unhealthy when nothing listens', async () => {
    expect(await healthcheck(['http'], { TETHER_PORT: String(gateway.port) })).toEqual({ code: 0, stderr: '' });
    const closed = await getFreePort();
    const down = await healthcheck(['http'], { TETHER_PORT: String(closed) });
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`unhealthy: http://127.0.0.1:${closed}/readyz`);
  });

  it('grpc: healthy when the session-log service at $TETHER_GRPC_PORT reports SERVING, unhealthy when nothing listens', async () => {
    expect(await healthcheck(['grpc'], { TETHER_GRPC_PORT: String(sessionLog.port) })).toEqual({ code: 0, stderr: '' });
    const down = await healthcheck(['grpc', `127.0.0.1:${await getFreePort()}`]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^unhealthy: /);
  });
});
