import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SseParser } from '@tether/protocol';
import { UpstreamTools } from '@tether/testing';
import { callTool, initialize, PROTOCOL_VERSION } from './raw-client.js';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ gateways: 1, eventStore: true });
});
afterAll(async () => {
  await stack?.teardown();
});

const TOTAL = 10_000;
const SLOW_PHASE_MS = 6_000;
const SLOW_EVENT_MS = 10;

describe('a slow client', () => {
  it('reading far slower than the upstream for 10,000 events loses nothing; gateway memory stays bounded', async () => {
    const gateway = stack.gateways[0]!;
    const sessionId = await initialize(gateway.url);
    const body = JSON.stringify(callTool(1, UpstreamTools.StreamProgress, { count: TOTAL, delayMs: 0 }));
    const rssBefore = await stack.rssKiB(gateway);
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      stack.rssKiB(gateway).then((kib) => {
        rssPeak = Math.max(rssPeak, kib);
      }, () => undefined);
    }, 250);
    const started = Date.now();
    const progress: number[] = [];
    let result: unknown;
    let slowEvents = 0;
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(gateway.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION },
      });
      req.on('error', reject);
      req.on('response', (res) => {
        expect(res.statusCode).toBe(200);
        // A tiny socket window, read by hand: the gateway must wait for us.
        res.socket.setNoDelay(true);
        const parser = new SseParser();
        res.on('data', (chunk: Buffer) => {
          let events = 0;
          for (const m of parser.push(chunk)) {
            if (m.data === '') continue;
            const msg = JSON.parse(m.data) as { method?: string; params?: { progress: number }; result?: unknown };
            if (msg.method === 'notifications/progress') progress.push(msg.params!.progress);
            else if (msg.result !== undefined) result = msg.result;
            events += 1;
          }
          if (Date.now() - started < SLOW_PHASE_MS && events > 0) {
            slowEvents += events;
            res.pause();
            setTimeout(() => res.resume(), events * SLOW_EVENT_MS);
          }
        });
        res.on('end', () => resolve());
        res.on('error', reject);
      });
      req.end(body);
    });
    clearInterval(sampler);
    const rssAfter = await stack.rssKiB(gateway);
    expect(progress).toEqual(Array.from({ length: TOTAL }, (_, i) => i + 1));
    expect(result).toMatchObject({ content: [{ type: 'text', text: `done ${TOTAL}` }] });
    // The reader really was slow for a while: well under 1/20 of 10,000 events in the slow phase.
    expect(slowEvents).toBeLessThan(TOTAL / 10);
    process.stdout.write(
      `slow client: ${TOTAL} events in ${Date.now() - started} ms; ${slowEvents} read in the slow phase at <= ${1000 / SLOW_EVENT_MS}/s; ` +
        `gateway RSS before ${Math.round(rssBefore / 1024)} MiB, peak ${Math.round(rssPeak / 1024)} MiB, after ${Math.round(rssAfter / 1024)} MiB\n`,
    );
    // The work is fixed (10,000 events read slowly); on a loaded 2-core machine it took over 60 s once.
  }, 180_000);
});
