import { describe, expect, it } from 'vitest';
import { requestsOfTransport, SDK_GET_STREAM } from '@tether/sdk';
import type { SdkTransport } from '@tether/sdk';
import { buildServer, transportClass } from './router-fixtures.js';

// `requestsOfTransport` reads a private field of the SDK transports
// (`_requestToStreamMapping`). This fails when an SDK release renames it or
// fills it after the priming event, so the store would silently lose the
// requests a stream owes.

const HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' };

describe.each(['v1', 'v2'] as const)('SDK %s transport internals', (major) => {
  it("names a POST stream's requests when its priming event is stored, and uses the GET stream id we expect", async () => {
    const seen: { stream: string; requests: readonly unknown[] | undefined }[] = [];
    let transport!: SdkTransport;
    const Transport = transportClass(major);
    transport = new Transport({
      sessionIdGenerator: () => 'AAAAAAAAAAAAAAAAAAAAAA',
      onsessionclosed: () => undefined,
      eventStore: {
        storeEvent: async (stream, message) => {
          if (Object.keys(message).length === 0) seen.push({ stream, requests: requestsOfTransport(transport)(stream) });
          return `e${seen.length}-${Math.random()}`;
        },
        replayEventsAfter: async () => SDK_GET_STREAM,
      },
    });
    await buildServer(major, () => false).connect(transport as never);
    const init = await transport.handleRequest(new Request('http://127.0.0.1/mcp', { method: 'POST', headers: HEADERS }), {
      parsedBody: { jsonrpc: '2.0', id: 'init-1', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } },
    });
    await init.text();
    expect(seen).toHaveLength(1);
    expect(seen[0]!.requests).toEqual(['init-1']);
    expect((transport as unknown as { _standaloneSseStreamId?: string })._standaloneSseStreamId).toBe(SDK_GET_STREAM);
    await transport.close();
  });
});
