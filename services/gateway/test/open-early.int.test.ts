import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { LogHeader } from '@tether/protocol';
import { createGateway, createLocalLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';

// A POST stream is opened (its prime appended) while the upstream works,
// when the upstream's last answer was a stream. These tests switch one
// upstream between SSE and JSON answers and read the log: the client gets
// exactly what the upstream sent, and no stream is left open in the log.

const STREAM = 'OPENEARLY';
let answerWith: 'sse' | 'json' = 'sse';
const upstream = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const msg = JSON.parse(body) as { id?: number; method: string };
    if (msg.id === undefined) {
      res.writeHead(202).end();
      return;
    }
    const result = msg.method === 'initialize' ? { protocolVersion: '2025-06-18', capabilities: {}, serverInfo: { name: 'switch', version: '1' } } : { answeredWith: answerWith };
    const line = JSON.stringify({ jsonrpc: '2.0', id: msg.id, result });
    if (answerWith === 'json') {
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'up-1' }).end(line);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'up-1' });
    res.end(`data: ${line}\n\n`);
  });
});

let nats: NatsServer;
let gateway: Gateway;
let url: string;
let nc: NatsConnection;
let jsm: JetStreamManager;
beforeAll(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  nats = await startNatsServer();
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
  const config = parseConfig(['--port', '0', '--nats', nats.url, '--upstream', upstreamUrl], {});
  gateway = createGateway(config, await createLocalLog({ servers: nats.url, streamName: STREAM }), pino({ level: 'silent' }));
  url = `http://127.0.0.1:${await gateway.listen()}/mcp`;
  nc = await connect({ servers: nats.url });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  await nc?.close();
  await gateway?.close();
  upstream.close();
  await nats?.cleanup();
});

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };

async function call(sessionId: string, id: number): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { ...HEADERS, 'mcp-session-id': sessionId }, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'x' } }) });
}

/** Each POST stream of the session in the log: its message count and the kind of its last message. */
async function postStreams(sessionId: string): Promise<{ count: number; last: string | undefined }[]> {
  // Appends that nobody waits for (an unused stream's end) land a moment later.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const info = await jsm.streams.info(STREAM, { subjects_filter: `tether.log.${sessionId}.>` });
  const subjects = Object.entries(info.state.subjects ?? {}).filter(([subject]) => !subject.endsWith('.0'));
  const out: { count: number; last: string | undefined }[] = [];
  for (const [subject, count] of subjects) {
    const last = await jsm.streams.getMessage(STREAM, { last_by_subj: subject });
    out.push({ count, last: last?.header.get(LogHeader.kind) });
  }
  return out;
}

describe('a POST stream opened while the upstream works', () => {
  it('the upstream answers JSON where it last answered a stream: the client gets the JSON as sent, and the stream opened early is ended', async () => {
    answerWith = 'sse';
    const init = await fetch(url, { method: 'POST', headers: HEADERS, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }) });
    expect(init.status).toBe(200);
    await init.text();
    const sessionId = init.headers.get('mcp-session-id')!;
    // initialize's answer was a stream too: prime, event, end.
    expect(await postStreams(sessionId)).toEqual([{ count: 3, last: 'end' }]);
    const counts = async (): Promise<number[]> => {
      const streams = await postStreams(sessionId);
      expect(streams.every((s) => s.last === 'end')).toBe(true);
      return streams.map((s) => s.count).sort();
    };

    // The last answer was a stream: this call opens one early, then gets JSON.
    answerWith = 'json';
    const json = await call(sessionId, 1);
    expect(json.headers.get('content-type')).toBe('application/json');
    expect(await json.json()).toEqual({ jsonrpc: '2.0', id: 1, result: { answeredWith: 'json' } });
    expect(await counts()).toEqual([2, 3]);

    // The last answer was JSON: nothing is opened for this one.
    const again = await call(sessionId, 2);
    expect(await again.json()).toEqual({ jsonrpc: '2.0', id: 2, result: { answeredWith: 'json' } });
    expect(await counts()).toEqual([2, 3]);

    // A stream again, opened after the answer: logged and served whole.
    answerWith = 'sse';
    const sse = await call(sessionId, 3);
    expect(sse.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await sse.text()).toContain('"answeredWith":"sse"');
    expect(await counts()).toEqual([2, 3, 3]);

    // And the next call, opened early, is a stream too: prime, event, end.
    const early = await call(sessionId, 4);
    expect(await early.text()).toContain('"id":4');
    expect(await counts()).toEqual([2, 3, 3, 3]);
  });
});
