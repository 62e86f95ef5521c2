import { createServer, connect } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startNatsProxy } from './nats-proxy.js';
import type { NatsProxy } from './nats-proxy.js';

// The TCP proxy of the gateway_nats_cut fault, against an echo server on
// loopback: a freeze holds bytes with the sockets open, a thaw delivers
// them in order, a reset closes both sides and refuses for a while.

let echo: Server | undefined;
let proxy: NatsProxy | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await proxy?.close();
  await new Promise<void>((resolve) => (echo === undefined ? resolve() : echo.close(() => resolve())));
  echo = undefined;
  proxy = undefined;
});

async function setup(): Promise<{ client: Socket; received: () => string; closed: () => boolean }> {
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((resolve) => echo!.listen(0, '127.0.0.1', resolve));
  proxy = await startNatsProxy([(echo.address() as AddressInfo).port]);
  const url = new URL(proxy.urls[0]!);
  const client = connect({ host: '127.0.0.1', port: Number(url.port) });
  sockets.push(client);
  let got = '';
  let isClosed = false;
  client.on('data', (d) => (got += d.toString()));
  client.on('close', () => (isClosed = true));
  client.on('error', () => undefined);
  await new Promise<void>((resolve) => client.once('connect', () => resolve()));
  return { client, received: () => got, closed: () => isClosed };
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(predicate: () => boolean, ms = 2_000): Promise<void> {
  const end = Date.now() + ms;
  while (!predicate() && Date.now() < end) await wait(10);
}

describe('chaos NATS proxy', () => {
  it('forwards, holds everything while frozen with the connection open, then delivers it in order', async () => {
    const { client, received, closed } = await setup();
    client.write('a');
    await until(() => received() === 'a');
    expect(received()).toBe('a');
    proxy!.freeze();
    client.write('b');
    client.write('c');
    await wait(300);
    expect(received()).toBe('a');
    expect(closed()).toBe(false);
    expect(proxy!.open).toBe(1);
    proxy!.thaw();
    await until(() => received() === 'abc');
    expect(received()).toBe('abc');
  });

  it('a connection opened while frozen is held too', async () => {
    proxy = undefined;
    const first = await setup();
    proxy!.freeze();
    const url = new URL(proxy!.urls[0]!);
    const second = connect({ host: '127.0.0.1', port: Number(url.port) });
    sockets.push(second);
    let got = '';
    second.on('data', (d) => (got += d.toString()));
    second.write('x');
    await wait(300);
    expect(got).toBe('');
    proxy!.thaw();
    await until(() => got === 'x');
    expect(got).toBe('x');
    void first;
  });

  it('reset closes every connection and refuses new ones for a while', async () => {
    const { closed } = await setup();
    expect(proxy!.reset(500)).toBe(1);
    await until(closed);
    expect(closed()).toBe(true);
    const url = new URL(proxy!.urls[0]!);
    const again = connect({ host: '127.0.0.1', port: Number(url.port) });
    sockets.push(again);
    let refusedClosed = false;
    again.on('close', () => (refusedClosed = true));
    again.on('error', () => undefined);
    await until(() => refusedClosed);
    expect(refusedClosed).toBe(true);
    expect(proxy!.stats.refused).toBe(1);
  });
});
