import { afterEach, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { SessionLog } from '@tether/session-log';
import { connectSdkClient, UpstreamTools } from '@tether/testing';
import { callTool, initialize, request } from './raw-client.js';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.teardown();
  stack = undefined;
});

/** Calls the streaming tool and SIGKILLs the gateway pumping it after `killAt` notifications. */
async function killPumpMidStream(s: Stack, killAt: number) {
  const sdk = await connectSdkClient(s.url);
  const progress: number[] = [];
  let killed: Promise<void> | undefined;
  const outcome = await sdk.client
    .callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 300, delayMs: 10 } }, CallToolResultSchema, {
      timeout: 60_000,
      onprogress: (p) => {
        progress.push(p.progress);
        if (p.progress === killAt) {
          const pumping = s.gatewayOf((r) => r.method === 'POST' && r.sessionId === sdk.transport.sessionId);
          if (pumping === undefined) throw new Error('no gateway served the POST');
          s.proxy.markDown(pumping.origin);
          killed = pumping.process.kill();
        }
      },
    })
    .then(
      (result) => ({ result, error: undefined }),
      (error: unknown) => ({ result: undefined, error }),
    );
  await killed;
  await sdk.close();
  return { progress, ...outcome };
}

describe('the pumping gateway is killed with SIGKILL mid-stream', () => {
  it('continues gap-free when the upstream can resume (nested resume from the last recorded upstream id)', async () => {
    stack = await startStack({ gateways: 3, eventStore: true });
    const { progress, result, error } = await killPumpMidStream(stack, 80);
    expect(error).toBeUndefined();
    expect(progress).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    expect(result?.content).toEqual([{ type: 'text', text: 'done 300' }]);
  });

  it('ends explicitly as abandoned when the upstream cannot resume, never with a silent gap', async () => {
    stack = await startStack({ gateways: 3, eventStore: false });
    const { progress, result, error } = await killPumpMidStream(stack, 80);
    expect(result).toBeUndefined();
    expect(String(error)).toMatch(/upstream response stream was lost and could not be resumed/);
    // What did arrive is a gap-free prefix.
    expect(progress).toEqual(Array.from({ length: progress.length }, (_, i) => i + 1));
    expect(progress.length).toBeGreaterThanOrEqual(80);
  });
});

describe('the pumping gateway dies after recording the last response, before the end marker', () => {
  // What a SIGKILL between the two appends leaves: written here with the
  // library exactly as the pump writes it, with no lease held, so the test
  // does not depend on when a kill lands.
  for (const resumeFrom of ['progress', 'result'] as const) {
    it(`a resume from the ${resumeFrom} gets the response once and the takeover ends the stream complete`, async () => {
      stack = await startStack({ gateways: 2, eventStore: false });
      const sessionId = await initialize(stack.url);
      const log = await SessionLog.create({ servers: stack.nats.url, namespace: stack.namespace });
      try {
        const stream = log.newStreamId();
        const json = (value: unknown) => Buffer.from(JSON.stringify(value));
        await log.append(sessionId, stream, 'prime', json({ requests: ['5'] }));
        const progress = await log.append(sessionId, stream, 'event', json({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p5', progress: 1, total: 1 } }));
        const result = await log.append(sessionId, stream, 'event', json({ jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'done 1' }] } }));
        const cursor = resumeFrom === 'progress' ? progress.id : result.id;

        const res = await request(stack.url, { method: 'GET', sessionId, lastEventId: cursor });
        expect(res.status).toBe(200);
        const delivered = [];
        for await (const m of res.messages) delivered.push({ id: m.id, event: m.event, data: m.data });
        // The resume acknowledgment (its id the cursor), then what follows it: the result at most, never an error for request 5.
        const seq = Number(cursor.split('-')[2]);
        const ack = { id: cursor, event: 'resume', data: JSON.stringify({ verdict: 'resumed', stream, next_seq: seq + 1 }) };
        const expected = resumeFrom === 'progress' ? [ack, { id: result.id, event: undefined, data: JSON.stringify({ jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'done 1' }] } }) }] : [ack];
        expect(delivered).toEqual(expected);
        const tail = await log.readPage(sessionId, stream, 3, 10);
        expect(tail.map((e) => [e.kind, e.endReason])).toEqual([['end', 'complete']]);
        expect((await log.getSession(sessionId))?.state).toBe('active');
      } finally {
        await log.close();
      }
    });
  }
});

describe('the instance holding the upstream GET is killed with SIGKILL', () => {
  /**
   * The first GET makes `a` the listener; a second, on `b`, supersedes its
   * delivery and reads what `a` records. `a` is SIGKILLed; with default
   * settings `b` probes its writer each --writer-check, finds it gone and
   * takes the listener over. Then `count` logging messages are sent through
   * the gateway `notifyVia`: the reader on `b` must get every one, without
   * reconnecting.
   */
  async function readerKeepsItsStream(options: { gateways: number; eventStore: boolean; notifyVia: number; count: number }): Promise<void> {
    stack = await startStack({ gateways: options.gateways, eventStore: options.eventStore });
    const sessionId = await initialize(stack.url);
    const [a, b] = stack.gateways;
    const first = await request(a!.url, { method: 'GET', sessionId });
    expect(first.status).toBe(200);
    await first.messages.next();
    const reader = await request(b!.url, { method: 'GET', sessionId });
    expect(reader.status).toBe(200);
    const messages = reader.messages;
    await messages.next();
    const tookOver = b!.process.waitForLine((line) => line['component'] === 'listener' && line['msg'] === 'holding the upstream GET stream', { timeoutMs: 20_000 });
    await a!.process.kill();
    await tookOver;
    const trigger = await request(stack.gateways[options.notifyVia]!.url, { method: 'POST', sessionId, body: callTool(3, UpstreamTools.NotifyStandalone, { count: options.count, delayMs: 10 }) });
    for await (const m of trigger.messages) void m;
    const notes: string[] = [];
    for await (const m of messages) {
      if (m.data !== '') notes.push(m.data);
      if (notes.length === options.count) break;
    }
    expect(notes.map((n) => JSON.parse(n).method)).toEqual(Array(options.count).fill('notifications/message'));
    reader.cancel();
  }

  it('a GET client on another instance keeps its stream: that instance takes the listener over, the client never reconnects', async () => {
    await readerKeepsItsStream({ gateways: 3, eventStore: true, notifyVia: 2, count: 5 });
  });

  it('the same with an upstream that keeps no event store, messages sent through the new listener\'s instance', async () => {
    await readerKeepsItsStream({ gateways: 2, eventStore: false, notifyVia: 1, count: 2 });
  });
});
