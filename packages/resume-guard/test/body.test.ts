import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SseParser, encodeResumeAck } from '@tether/protocol';
import { RESUME_VIOLATION_RPC_CODE, createResumeGuard } from '@tether/resume-guard';
import type { ResumeViolationError } from '@tether/resume-guard';

const URL_ = 'http://mcp.test/mcp';
const enc = new TextEncoder();
const events = (ids: number[], eol = '\n') =>
  ids.map((n) => `id: ${n}${eol}event: message${eol}data: {"jsonrpc":"2.0","method":"tick","params":{"n":${n}}}${eol}${eol}`).join('');

function split(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts)].filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let from = 0;
  for (const p of [...points, bytes.length]) {
    out.push(bytes.slice(from, p));
    from = p;
  }
  return out;
}

function sse(chunks: Uint8Array[], headers: Record<string, string> = {}): Response {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
  return new Response(body, { headers: { 'content-type': 'text/event-stream', 'mcp-session-id': 'S1', ...headers } });
}

/** A session whose tool stream delivered ids 1..3, then a resume from 3 answered with `resume`. */
async function resumeWith(resume: Uint8Array[]) {
  const violations: ResumeViolationError[] = [];
  const guard = createResumeGuard({
    autoReinitialize: false,
    onViolation: (e) => void violations.push(e),
    fetch: async (_input, init) => {
      const body = typeof init?.body === 'string' ? init.body : '';
      if (init?.method === 'GET') return sse(resume);
      if (body.includes('"initialize"')) {
        return Response.json({ jsonrpc: '2.0', id: 0, result: { protocolVersion: '2025-11-25' } }, { headers: { 'mcp-session-id': 'S1' } });
      }
      return sse([enc.encode(events([1, 2, 3]))]);
    },
  });
  const post = (message: unknown) =>
    guard.fetch(URL_, { method: 'POST', headers: { 'mcp-session-id': 'S1', 'content-type': 'application/json' }, body: JSON.stringify(message) });
  await (await guard.fetch(URL_, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} }) })).text();
  await (await post({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'count' } })).text();
  const res = await guard.fetch(URL_, { method: 'GET', headers: { 'mcp-session-id': 'S1', 'last-event-id': '3' } });
  const received: Uint8Array[] = [];
  let error: unknown;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) received.push(chunk);
  } catch (err) {
    error = err;
  }
  const text = Buffer.concat(received).toString('utf8');
  const parsed = new SseParser().push(text);
  return { text, parsed, error, violations };
}

describe('guarded body', () => {
  it('passes a correct resumed stream through byte for byte, however it is chunked', async () => {
    const bytes = enc.encode(`: heartbeat\n\nretry: 100\n\n${events([4, 5, 6, 7, 8])}`);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), async (cuts) => {
        const r = await resumeWith(split(bytes, cuts));
        expect(r.error).toBeUndefined();
        expect(r.violations).toEqual([]);
        expect(r.text).toBe(new TextDecoder().decode(bytes));
      }),
      { numRuns: 60 },
    );
  });

  it('passes a resume acknowledgment and the stream after it through byte for byte, however it is chunked', async () => {
    const bytes = enc.encode(`${encodeResumeAck({ cursor: '3', stream: '0', nextSeq: 4, retryMs: 1000 })}: heartbeat\n\n${events([4, 5, 6])}`);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), async (cuts) => {
        const r = await resumeWith(split(bytes, cuts));
        expect(r.error).toBeUndefined();
        expect(r.violations).toEqual([]);
        expect(r.text).toBe(new TextDecoder().decode(bytes));
      }),
      { numRuns: 60 },
    );
  });

  it('delivers nothing of a resume that repeats the cursor bare (empty data), however it is chunked: a replay', async () => {
    const bytes = enc.encode(`id: 3\nretry: 1000\ndata:\n\n${events([4, 5])}`);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), async (cuts) => {
        const r = await resumeWith(split(bytes, cuts));
        expect(r.violations.map((v) => [v.code, v.eventId])).toEqual([['replay_from_zero', '3']]);
        // Only the guard's error event for the pending request reached the client.
        expect(r.parsed).toHaveLength(1);
        expect(JSON.parse(r.parsed[0]?.data ?? '{}')).toMatchObject({ id: 7, error: { code: RESUME_VIOLATION_RPC_CODE, data: { code: 'replay_from_zero' } } });
      }),
      { numRuns: 30 },
    );
  });

  it('delivers nothing of a resume whose acknowledgment is malformed, and says what is wrong with it', async () => {
    const r = await resumeWith([enc.encode(`id: 3\nevent: resume\ndata: {"verdict":"resumed","stream":"0","next_seq":"4"}\n\n${events([4])}`)]);
    expect(r.violations.map((v) => v.code)).toEqual(['malformed_ack']);
    expect(r.violations[0]?.message).toBe(`malformed_ack resuming from 3: the resume acknowledgment's data is malformed: resume ack next_seq must be a safe integer >= 1, got "4"`);
    expect(r.parsed.map((m) => m.event)).toEqual(['message']);
  });

  it('delivers nothing of a gapped resume, however it is chunked, and fails the pending request instead', async () => {
    const bytes = enc.encode(events([6, 7, 8]));
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), async (cuts) => {
        const r = await resumeWith(split(bytes, cuts));
        expect(r.violations.map((v) => v.code)).toEqual(['gap']);
        // The error event repeats the client's cursor, so the SDK keeps it.
        expect(r.parsed.map((m) => m.id)).toEqual(['3']);
        const answer = JSON.parse(r.parsed[0]?.data ?? '{}') as { id: unknown; error: { code: number; data: { code: string } } };
        expect(answer).toMatchObject({ id: 7, error: { code: RESUME_VIOLATION_RPC_CODE, data: { code: 'gap', eventId: '6' } } });
      }),
      { numRuns: 60 },
    );
  });

  it.each(['\n', '\r\n', '\r'])('never lets the client dispatch the event after a seam, however it is chunked (eol %j)', async (eol) => {
    const bytes = enc.encode(events([4, 5, 9, 10], eol));
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), async (cuts) => {
        const r = await resumeWith(split(bytes, cuts));
        expect(r.violations.map((v) => [v.code, v.position])).toEqual([['gap', 'within']]);
        const ids = r.parsed.map((m) => m.id).filter((id) => id !== undefined);
        // What passed before the seam, then the error event repeating the client's last id.
        expect(['3', '4,4', '4,5,5']).toContain(ids.join(','));
      }),
      { numRuns: 60 },
    );
  });
});

describe('the resume acknowledgment of a resumed stream', () => {
  it('reaches the client at once, before any event (held back, a cut would leave the SDK without its cursor)', async () => {
    let close: (() => void) | undefined;
    const open = new ReadableStream<Uint8Array>({
      start(c) {
        // The server's opening of a resume: a retry hint and the acknowledgment, then nothing yet.
        c.enqueue(enc.encode(`retry: 1000\n\n${encodeResumeAck({ cursor: '3', stream: '0', nextSeq: 4 })}`));
        close = () => c.error(new Error('connection cut'));
      },
    });
    const guard = createResumeGuard({
      autoReinitialize: false,
      fetch: async (_input, init) => {
        const body = typeof init?.body === 'string' ? init.body : '';
        if (init?.method === 'GET') return new Response(open, { headers: { 'content-type': 'text/event-stream', 'mcp-session-id': 'S1' } });
        if (body.includes('"initialize"')) return Response.json({ jsonrpc: '2.0', id: 0, result: { protocolVersion: '2025-11-25' } }, { headers: { 'mcp-session-id': 'S1' } });
        return sse([enc.encode(events([1, 2, 3]))]);
      },
    });
    await (await guard.fetch(URL_, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} }) })).text();
    await (await guard.fetch(URL_, { method: 'POST', headers: { 'mcp-session-id': 'S1' }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: {} }) })).text();
    const res = await guard.fetch(URL_, { method: 'GET', headers: { 'mcp-session-id': 'S1', 'last-event-id': '3' } });
    const reader = res.body!.getReader();
    const seen: string[] = [];
    const first = await Promise.race([
      (async () => {
        for (;;) {
          const r = await reader.read();
          if (r.done) return 'ended';
          seen.push(new TextDecoder().decode(r.value));
          if (new SseParser().push(seen.join('')).some((m) => m.id === '3' && m.event === 'resume')) return 'ack';
        }
      })(),
      new Promise<string>((resolve) => setTimeout(() => resolve('held back'), 1_000)),
    ]);
    expect(first).toBe('ack');
    close?.();
    await reader.cancel().catch(() => undefined);
  });
});
