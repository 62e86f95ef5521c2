import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectSdkClient, startNatsServer, startRoundRobinProxy, startServiceProcess } from '@tether/testing';
import type { NatsServer, RoundRobinProxy, ServiceProcess } from '@tether/testing';

/**
 * Real processes end to end: nats-server, the session-log service, two
 * instances of the custom server (which know each other only through the
 * log), a strict round-robin balancer, and the official SDK client.
 */
const SESSION_LOG = fileURLToPath(new URL('../../../services/session-log/dist/main.js', import.meta.url));
const CUSTOM_SERVER = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const TOKEN = 'custom-server-token-0123456789';

let nats: NatsServer;
let sessionLog: ServiceProcess;
const instances: ServiceProcess[] = [];
let proxy: RoundRobinProxy;
beforeAll(async () => {
  for (const file of [SESSION_LOG, CUSTOM_SERVER]) if (!existsSync(file)) throw new Error(`${file} is missing: run \`npx tsc -b\` first (npm test does)`);
  nats = await startNatsServer();
  sessionLog = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SESSION_LOG, '--port', '0', '--nats', nats.url, '--token', `custom:${TOKEN}`],
    readyLine: (o) => o.msg === 'listening',
  });
  for (const name of ['a', 'b']) {
    instances.push(
      await startServiceProcess({
        name: `custom-server-${name}`,
        command: process.execPath,
        args: [CUSTOM_SERVER, '--port', '0', '--log', `127.0.0.1:${sessionLog.port}`, '--token', TOKEN, '--instance', name],
        readyLine: (o) => o.msg === 'listening',
      }),
    );
  }
  proxy = await startRoundRobinProxy(instances.map((i) => `http://127.0.0.1:${i.port}`));
});
afterAll(async () => {
  await proxy?.close();
  for (const instance of instances) await instance.stop();
  await sessionLog?.stop();
  await nats?.cleanup();
});

describe('custom server on the gRPC cursor API, two instances behind a round-robin balancer', () => {
  it('a streaming tool call survives a cut connection: the SDK resumes on the other instance, gap-free', async () => {
    const sdk = await connectSdkClient(`${proxy.url}/mcp`);
    // The SDK opens its standalone GET stream on its own (this server
    // answers 405); wait for it so the next requests alternate predictably.
    await expect.poll(() => proxy.history().some((r) => r.method === 'GET' && r.status === 405)).toBe(true);
    const progress: number[] = [];
    let cut = 0;
    const result = await sdk.client.callTool({ name: 'countdown', arguments: { count: 30, intervalMs: 40 } }, undefined, {
      timeout: 30_000,
      onprogress: (p) => {
        progress.push(p.progress);
        if (p.progress === 8) cut = proxy.cutAll();
      },
    });
    expect(cut).toBeGreaterThan(0);
    expect(result.content).toEqual([{ type: 'text', text: 'counted to 30' }]);
    // Every progress notification exactly once, in order: no replay from zero, no gap.
    expect(progress).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));

    const history = proxy.history();
    const resumeAt = history.findIndex((r) => r.method === 'GET' && r.lastEventId !== undefined);
    expect(resumeAt).toBeGreaterThan(0);
    const resumeRequest = history[resumeAt]!;
    const cutPost = history.slice(0, resumeAt).reverse().find((r) => r.method === 'POST')!;
    expect(resumeRequest.status).toBe(200);
    expect(resumeRequest.sessionId).toBe(cutPost.sessionId);
    expect(resumeRequest.target).not.toBe(cutPost.target);
    expect(sdk.errors.some((e) => /disconnected/i.test(e.message))).toBe(true);
    await sdk.transport.terminateSession();
    await sdk.close();
  });

  it('a cursor the log cannot continue is refused loudly: 400 malformed, 404 (and the session ended) otherwise', async () => {
    const sdk = await connectSdkClient(`${proxy.url}/mcp`);
    const sessionId = sdk.transport.sessionId!;
    const get = (lastEventId: string) =>
      fetch(`${proxy.url}/mcp`, { headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'last-event-id': lastEventId } });
    const malformed = await get('not-an-event-id');
    expect([malformed.status, malformed.headers.get('tether-resume')]).toEqual([400, 'malformed']);
    const foreign = await get('aaaaaaaaaa-0-1-1');
    expect([foreign.status, foreign.headers.get('tether-resume')]).toEqual([404, 'epoch_mismatch']);
    // The session was terminated: a spec client's next request gets 404 and starts over.
    const after = await fetch(`${proxy.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
    await sdk.close();
  });
});
