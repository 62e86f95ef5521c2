import { createServer, get } from 'node:http';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { LogEvent } from '@tether/session-log';
import { deliver } from '../src/streams/deliver.js';
import type { DeliverOptions } from '../src/streams/deliver.js';

// A primed stream's headers and its opening frame (the resume
// acknowledgment) leave in one socket write. Written apart, a lost segment
// then a reset can leave an SDK client a resumed 200 with no id, and it
// reconnects without its cursor (finding 17, docs/reliability.md). Node
// writes a chunk as several socket writes inside one cork (one writev), so
// "one write" here is: the first corked batch holds both.

const servers: Array<ReturnType<typeof createServer>> = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((done) => s.close(done));
  }
});

async function nothingUntil(signal: AbortSignal): Promise<void> {
  if (!signal.aborted) await new Promise((done) => signal.addEventListener('abort', done, { once: true }));
}

/** Serves one GET with `deliver`; returns what went to the socket in its first write: one uncorked write, or the first corked batch. */
async function firstWrite(options: Omit<DeliverOptions, 'signal' | 'heartbeatMs' | 'headers' | 'retryMs'>): Promise<string> {
  const writes: Array<{ text: string; corked: boolean }> = [];
  const stop = new AbortController();
  const served = new Promise<void>((resolve) => {
    const server = createServer((req, res: ServerResponse) => {
      const socket = req.socket;
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
      socket.write = ((chunk: unknown, ...rest: unknown[]) => {
        writes.push({ text: typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('latin1'), corked: socket.writableCorked > 0 });
        return write(chunk, ...rest);
      }) as typeof socket.write;
      async function* events(): AsyncGenerator<LogEvent> {
        await nothingUntil(stop.signal);
      }
      void deliver(res, events(), { ...options, headers: { 'mcp-session-id': 'S1' }, retryMs: 10, heartbeatMs: 60_000, signal: stop.signal }).then(() => {
        res.end();
        resolve();
      });
    });
    servers.push(server);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      get({ host: '127.0.0.1', port, path: '/mcp' }, (res) => {
        // The response's headers are here; what went with them is in `writes`.
        stop.abort();
        res.resume();
      });
    });
  });
  await served;
  if (writes[0]?.corked !== true) return writes[0]?.text ?? '';
  const batch = writes.findIndex((w) => !w.corked);
  return writes.slice(0, batch === -1 ? undefined : batch).map((w) => w.text).join('');
}

describe('deliver: the opening of a stream', () => {
  it('sends a primed resume\'s headers and acknowledgment in one write', async () => {
    const first = await firstWrite({ priming: true, resumeAck: { cursor: 'ep-abcdefgh-3-30', stream: 'abcdefgh', nextSeq: 4 } });
    expect(first).toMatch(/^HTTP\/1\.1 200/);
    expect(first).toContain('id: ep-abcdefgh-3-30\nevent: resume\n');
  });

  it('sends a fresh primed stream\'s headers and priming event in one write', async () => {
    const first = await firstWrite({ priming: true, primeId: 'ep-abcdefgh-0-7' });
    expect(first).toMatch(/^HTTP\/1\.1 200/);
    expect(first).toContain('id: ep-abcdefgh-0-7\n');
  });

  it('sends an unprimed stream\'s headers at once, before any event', async () => {
    // Nothing to send yet: the headers may not wait for the first event.
    const first = await firstWrite({ priming: false });
    expect(first).toMatch(/^HTTP\/1\.1 200/);
    expect(first).toMatch(/\r\n\r\n$/);
  });
});
