import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectSdkClient, startMcpUpstream } from '@tether/testing';
import type { McpUpstream } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

// A TCP relay in front of the SDK upstream counts the gateway's connections to it.
let upstream: McpUpstream;
let relay: Server;
const sockets = new Set<Socket>();
let connections = 0;
let stack: InProcessStack;
beforeAll(async () => {
  upstream = await startMcpUpstream({ eventStore: true });
  relay = createServer((client) => {
    connections += 1;
    const server = connect(upstream.port, '127.0.0.1');
    for (const s of [client, server]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(server).pipe(client);
    client.once('close', () => server.destroy());
    server.once('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  stack = await startInProcessStack({ upstreamUrl: `http://127.0.0.1:${(relay.address() as AddressInfo).port}/mcp` });
});
afterAll(async () => {
  await stack.teardown();
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => relay.close(resolve));
  await upstream.close();
});

async function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const started = Date.now(); Date.now() - started < timeoutMs; await new Promise((r) => setTimeout(r, 20))) if (check()) return true;
  return check();
}

describe('upstream connections', () => {
  it('tool calls through the gateway reuse pooled keep-alive connections, logged SSE answers included', async () => {
    const sdk = await connectSdkClient(stack.urls[0]!);
    // Connected: initialize and notifications/initialized (POSTs), and the
    // session's listener GET, which has a connection of its own (node:http).
    expect(await until(() => upstream.openGetStreams() === 1, 5_000)).toBe(true);
    const afterConnect = connections;
    const calls = 10;
    for (let i = 0; i < calls; i += 1) {
      const result = await sdk.client.callTool({ name: 'echo', arguments: { text: `hello ${i}` } });
      expect(result.content).toEqual([{ type: 'text', text: `hello ${i}` }]);
    }
    const forCalls = connections - afterConnect;
    process.stdout.write(`upstream connections: ${afterConnect} to connect, ${forCalls} for ${calls} logged tool calls\n`);
    expect(forCalls).toBeLessThanOrEqual(1);
    await sdk.transport.terminateSession();
    await sdk.close();
  });
});
