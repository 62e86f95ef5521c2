import { createServer, connect } from 'node:net';
import type { Server, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CLEAR, startLinkProxy } from './link-proxy.js';
import type { LinkProxy } from './link-proxy.js';

// The TCP fault proxy of `--net hosts` on loopback: delay and jitter keep
// the stream in order, a one-way stall holds one direction only, a reset
// cuts and refuses.

let echo: Server | undefined;
let proxy: LinkProxy | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await proxy?.close();
  await new Promise<void>((resolve) => (echo === undefined ? resolve() : echo.close(() => resolve())));
});

async function setup(): Promise<{ client: Socket; received: () => string }> {
  echo = createServer((s) => {
    sockets.push(s);
    s.on('data', (d) => s.write(d));
  });
  await new Promise<void>((resolve) => echo!.listen(0, '127.0.0.1', () => resolve()));
  const port = (echo.address() as { port: number }).port;
  proxy = await startLinkProxy([{ name: 'l', listenHost: '127.0.0.1', listenPort: 0, targetHost: '127.0.0.1', targetPort: port }], 7);
  const client = connect(proxy.ports['l']!, '127.0.0.1');
  sockets.push(client);
  let got = '';
  client.on('data', (d) => (got += d.toString()));
  await new Promise((resolve) => client.once('connect', resolve));
  return { client, received: () => got };
}

const until = async (cond: () => boolean, ms = 3_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('chaos link proxy', () => {
  it('adds delay with jitter each way, keeping the stream in order', async () => {
    const { client, received } = await setup();
    proxy!.shape({ delayMs: 20, jitterMs: 30, bytesPerSec: 0, stall: 'none' });
    const began = Date.now();
    const sent = Array.from({ length: 50 }, (_, i) => `${i},`).join('');
    for (const part of sent.split(',').filter((p) => p !== '')) client.write(`${part},`);
    await until(() => received() === sent);
    // Two hops of at least 20 ms each.
    expect(Date.now() - began).toBeGreaterThanOrEqual(40);
    proxy!.shape(CLEAR);
  });

  it('a one-way stall holds what goes up, and sends it in order when it ends', async () => {
    const { client, received } = await setup();
    proxy!.shape({ ...CLEAR, stall: 'up' });
    client.write('a');
    client.write('b');
    await new Promise((r) => setTimeout(r, 100));
    expect(received()).toBe('');
    expect(proxy!.stats()['l']!.open).toBe(1);
    proxy!.shape(CLEAR);
    await until(() => received() === 'ab');
  });

  it('a bandwidth cap slows a transfer down', async () => {
    const { client, received } = await setup();
    proxy!.shape({ ...CLEAR, bytesPerSec: 50_000 });
    const began = Date.now();
    client.write('x'.repeat(10_000));
    await until(() => received().length === 10_000);
    // 10 kB up and back at 50 kB/s each way: 0.2 s at least one way.
    expect(Date.now() - began).toBeGreaterThanOrEqual(180);
  });

  it('a reset destroys the connection and refuses new ones for a while', async () => {
    const { client } = await setup();
    const closed = new Promise((resolve) => client.once('close', resolve));
    expect(proxy!.reset(300)).toBe(1);
    await closed;
    const again = connect(proxy!.ports['l']!, '127.0.0.1');
    sockets.push(again);
    await new Promise((resolve) => again.once('close', resolve));
    expect(proxy!.stats()['l']!.refused).toBe(1);
  });
});
