import { describe, expect, it } from 'vitest';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { encodeResumeAck } from '@tether/protocol';
import { createResumeGuard } from '@tether/resume-guard';

// The official SDK client (v1) keeps a stream's cursor only from ids it has
// *read*: a reconnection of a resumed GET that breaks before its first event
// is read is scheduled with no Last-Event-ID (`lastEventId` starts undefined
// in each `_handleSseStream`). The resume acknowledgment (the cursor as its
// id) is what gives it one. A reset right behind the acknowledgment, at any
// of ten microtask offsets, through the guard: the reconnection must carry
// the cursor. (Chaos saw one `stall_cursor_lost` in 14,401 resumes in a run
// of issue 24; this does not reproduce it: it holds on the code as it is.)

const URL_ = 'http://mcp.test/mcp';
const enc = new TextEncoder();
const ACK = encodeResumeAck({ cursor: 'ep-abcdefgh-3-30', stream: 'abcdefgh', nextSeq: 4 });

describe('a resumed response cut right behind its acknowledgment', () => {
  it('leaves the SDK client its cursor: the reconnection carries Last-Event-ID, every time', async () => {
    const reconnects: Array<string | null> = [];
    const round = { n: 0 };
    let gets = 0;
    const guard = createResumeGuard({
      autoReinitialize: false,
      fetch: async (_input, init) => {
        const headers = new Headers(init?.headers);
        if (init?.method === 'GET') {
          gets += 1;
          if (gets > 1) {
            reconnects.push(headers.get('last-event-id'));
            // The next attempt: hold the stream open, nothing more to see.
            return new Response(new ReadableStream({ start() {} }), { headers: { 'content-type': 'text/event-stream', 'mcp-session-id': 'S1' } });
          }
          // The resume: its acknowledgment, then the connection resets.
          // The reset comes after a varying number of microtasks: somewhere
          // between the acknowledgment leaving the guard and the SDK reading it.
          const ticks = round.n % 10;
          const body = new ReadableStream<Uint8Array>({
            start(c) {
              c.enqueue(enc.encode(`retry: 10\n\n${ACK}`));
            },
            async pull(c) {
              for (let i = 0; i < ticks; i += 1) await Promise.resolve();
              c.error(new TypeError('terminated: other side closed'));
            },
          });
          return new Response(body, { headers: { 'content-type': 'text/event-stream', 'mcp-session-id': 'S1' } });
        }
        return new Response(null, { status: 202 });
      },
    });
    const rounds = 40;
    for (; round.n < rounds; round.n += 1) {
      gets = 0;
      const transport = new StreamableHTTPClientTransport(new URL(URL_), {
        fetch: guard.fetch as typeof fetch,
        sessionId: 'S1',
        reconnectionOptions: { initialReconnectionDelay: 1, maxReconnectionDelay: 5, reconnectionDelayGrowFactor: 1, maxRetries: 3 },
      });
      transport.onerror = () => undefined;
      await transport.start();
      await transport.resumeStream('ep-abcdefgh-3-30');
      for (let i = 0; i < 100 && reconnects.length <= round.n; i += 1) await new Promise((resolve) => setTimeout(resolve, 5));
      await transport.close();
    }
    expect(reconnects).toHaveLength(rounds);
    expect(reconnects.filter((id) => id !== 'ep-abcdefgh-3-30')).toEqual([]);
  });
});
