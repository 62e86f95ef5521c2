import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { decodeEventId, SseParser } from '@tether/protocol';
import { connectSdkClient, UpstreamTools } from '@tether/testing';
import { callTool, initialize, PROTOCOL_VERSION, request } from './raw-client.js';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ gateways: 3, eventStore: true });
});
afterAll(async () => {
  await stack?.teardown();
});

describe('cross-instance resume through a rotating balancer', () => {
  it('500 progress notifications, connection cut several times, every one exactly once and in order', async () => {
    const sdk = await connectSdkClient(stack.url);
    const progress: number[] = [];
    let cuts = 0;
    const call = sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 500, delayMs: 4 } }, CallToolResultSchema, {
      onprogress: (p) => {
        progress.push(p.progress);
        // Cut at pseudo-random points while the stream runs.
        if ([37, 151, 260, 333, 420].includes(p.progress)) {
          cuts += 1;
          stack.proxy.cutAll();
        }
      },
      timeout: 60_000,
    });
    const result = await call;
    expect(cuts).toBe(5);
    expect(progress).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
    expect(result.content).toEqual([{ type: 'text', text: 'done 500' }]);
    // The stream really was resumed, and every resume went to a different
    // instance than the request before it (the balancer rotates strictly).
    // How many resumes a cut causes depends on timing (a cut can land while
    // a reconnect is in flight), so only their existence is asserted.
    const history = stack.proxy.history();
    const resumes = history.filter((r) => r.method === 'GET' && r.lastEventId !== undefined && r.status === 200);
    expect(resumes.length).toBeGreaterThanOrEqual(1);
    for (const resume of resumes) {
      const before = history.find((r) => r.seq === resume.seq - 1);
      if (before !== undefined) expect(resume.target).not.toBe(before.target);
    }
    await sdk.transport.terminateSession();
    await sdk.close();
  });

  it('a raw resumed stream opens with the resume acknowledgment: event: resume, the cursor as id, its JSON', async () => {
    const sessionId = await initialize(stack.url);
    const post = await request(stack.url, { method: 'POST', sessionId, body: callTool(1, UpstreamTools.StreamProgress, { count: 6, delayMs: 0 }) });
    const ids: string[] = [];
    for await (const m of post.messages) if (m.id !== undefined) ids.push(m.id);
    const cursor = ids[3]!;
    const decoded = decodeEventId(cursor);
    if (!decoded.ok) throw new Error(decoded.reason);
    // The bytes as the gateway sends them (on another instance than the POST: the balancer rotates).
    const res = await fetch(stack.url, {
      headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION, 'last-event-id': cursor },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('tether-resume')).toBe('resumed');
    const text = await res.text();
    const ack = `id: ${cursor}\nevent: resume\nretry: 1000\ndata: {"verdict":"resumed","stream":"${decoded.value.stream}","next_seq":${decoded.value.seq + 1}}\n\n`;
    expect(text.startsWith(ack)).toBe(true);
    // Then the events after the cursor, the first of them at the announced seq; no other frame repeats the cursor.
    const messages = new SseParser().push(text);
    expect(messages.filter((m) => m.id === cursor)).toHaveLength(1);
    expect(messages.slice(1).map((m) => m.id)).toEqual(ids.slice(4));
    expect(decodeEventId(messages[1]?.id).ok && Number(messages[1]!.id!.split('-')[2])).toBe(decoded.value.seq + 1);
  });
});
