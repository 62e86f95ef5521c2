import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { encodeResumeAck } from '@tether/protocol';
import { createResumeGuard } from '@tether/resume-guard';
import type { FetchLike } from '@tether/resume-guard';

// Finding 17 (docs/reliability.md), over a real socket: a resumed GET whose
// response breaks or ends around its acknowledgment. Both official SDK
// clients (v1 1.32, v2 2.4) start every response with no cursor of their
// own and reconnect with the last id *that response* carried:
// - broken or ended before its first id (no acknowledgment, no event), they
//   reconnect without Last-Event-ID, so a request's stream is never resumed
//   and the call waits for its timeout. Across hosts the headers and the
//   acknowledgment can part (a lost segment, then a reset), which loopback
//   almost never shows. The cause of finding 17;
// - reset right behind the acknowledgment, the reset could in principle
//   reach the SDK's pipeline first (the first suspect; it never did).
// Through the guard every reconnection must carry the cursor; unguarded,
// the SDKs' own behaviour is shown beside it.

const CURSOR = 'ep-abcdefgh-3-30';
const ACK = encodeResumeAck({ cursor: CURSOR, stream: 'abcdefgh', nextSeq: 4 });

/** How the resumed response goes wrong after its headers, by round. */
const ENDINGS = [
  'reset at once',
  'reset 2 ms later',
  'half the acknowledgment, then a reset',
  'retry hint, then a reset',
  'clean end with nothing',
  'the acknowledgment and a reset in one burst',
  'the acknowledgment, then a reset 1 ms later',
] as const;
type Ending = (typeof ENDINGS)[number];

const reconnects: Array<string | null> = [];
let ending: Ending = 'reset at once';
let answered = 0;
let url = '';
const server = createServer((req, res) => {
  if (req.method !== 'GET') {
    res.writeHead(202).end();
    return;
  }
  const cursor = req.headers['last-event-id'];
  if (answered > 0) reconnects.push(cursor === undefined ? null : String(cursor));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'S1' });
  res.flushHeaders();
  if (answered > 0) return; // the reconnection: held open, nothing more to see
  answered += 1;
  const reset = () => req.socket.destroy();
  if (ending === 'reset at once') setImmediate(reset);
  else if (ending === 'reset 2 ms later') setTimeout(reset, 2);
  else if (ending === 'half the acknowledgment, then a reset') res.write(ACK.slice(0, Math.floor(ACK.length / 2)), () => setTimeout(reset, 1));
  else if (ending === 'retry hint, then a reset') res.write('retry: 10\n\n', () => setTimeout(reset, 1));
  else if (ending === 'the acknowledgment and a reset in one burst') res.write(`retry: 10\n\n${ACK}`, reset);
  else if (ending === 'the acknowledgment, then a reset 1 ms later') res.write(`retry: 10\n\n${ACK}`, () => setTimeout(reset, 1));
  else res.end();
});

beforeAll(async () => {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
});

const RECONNECT = { initialReconnectionDelay: 1, maxReconnectionDelay: 5, reconnectionDelayGrowFactor: 1, maxRetries: 3 };

interface ResumingTransport {
  onerror?: (err: Error) => void;
  start(): Promise<void>;
  resumeStream(lastEventId: string): Promise<void>;
  close(): Promise<void>;
}

/** One resume per ending, `rounds` times over: the Last-Event-ID of each reconnection (null: none; 'none': no reconnection). */
async function resumeThroughEachEnding(open: (fetch: FetchLike) => ResumingTransport, guarded: boolean, rounds: number): Promise<Map<Ending, Array<string | null>>> {
  const seen = new Map<Ending, Array<string | null>>(ENDINGS.map((e) => [e, []]));
  for (let round = 0; round < rounds; round += 1) {
    for (const e of ENDINGS) {
      ending = e;
      answered = 0;
      const before = reconnects.length;
      const fetchFn: FetchLike = guarded ? createResumeGuard({ autoReinitialize: false }).fetch : (input, init) => fetch(input, init);
      const transport = open(fetchFn);
      transport.onerror = () => undefined;
      await transport.start();
      await transport.resumeStream(CURSOR);
      for (let i = 0; i < 200 && reconnects.length === before; i += 1) await new Promise((resolve) => setTimeout(resolve, 5));
      await transport.close();
      seen.get(e)!.push(reconnects.length === before ? 'none' : (reconnects[before] ?? null));
    }
  }
  return seen;
}

const v1 = (f: FetchLike): ResumingTransport => new V1Transport(new URL(url), { fetch: f as typeof fetch, sessionId: 'S1', reconnectionOptions: RECONNECT });
const v2 = (f: FetchLike): ResumingTransport => new V2Transport(new URL(url), { fetch: f as typeof fetch, sessionId: 'S1', reconnectionOptions: RECONNECT });

function report(label: string, seen: Map<Ending, Array<string | null>>): Map<Ending, number> {
  const lost = new Map<Ending, number>();
  for (const [e, ids] of seen) {
    const without = ids.filter((id) => id !== CURSOR).length;
    lost.set(e, without);
    process.stdout.write(`${label}, ${e}: ${ids.length - without} of ${ids.length} reconnections carried the cursor (others: ${JSON.stringify(ids.filter((id) => id !== CURSOR).slice(0, 3))})\n`);
  }
  return lost;
}

describe('a resumed response that breaks around its acknowledgment, over a socket', () => {
  for (const [name, open] of [['SDK v1', v1], ['SDK v2', v2]] as const) {
    it(`${name} through the guard: every reconnection carries the cursor`, async () => {
      const lost = report(`${name}, guarded`, await resumeThroughEachEnding(open, true, 12));
      expect(Object.fromEntries(lost)).toEqual(Object.fromEntries(ENDINGS.map((e) => [e, 0])));
    }, 120_000);

    it(`${name} without the guard reconnects without Last-Event-ID when no id of the response reached it (the SDK's own behaviour, which the guard covers)`, async () => {
      const lost = report(`${name}, unguarded`, await resumeThroughEachEnding(open, false, 2));
      // If this fails, the SDK now keeps its cursor by itself: the guard's
      // id-only event is then redundant (harmless), and finding 17's text
      // in docs/reliability.md should say so.
      expect(lost.get('reset at once')).toBeGreaterThan(0);
      expect(lost.get('clean end with nothing')).toBeGreaterThan(0);
      // With the acknowledgment read, the SDK keeps the cursor by itself.
      expect(lost.get('the acknowledgment, then a reset 1 ms later')).toBe(0);
    }, 120_000);
  }
});
