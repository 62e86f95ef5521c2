/**
 * Reproduces finding 1 of docs/reliability.md: an SDK client behind the
 * resume guard loses its cursor when a resumed response breaks right after
 * its priming event (the cursor echoed back), and its request hangs.
 *
 *   npx tsc -b && npx tsx test/chaos/repro/guard-cursor-echo.ts [--no-guard]
 *
 * One gateway, one SDK upstream with an event store, one SDK client. Under
 * the guard a fetch breaks the tools/call stream after 3 chunks, then breaks
 * the first resume of it after its first chunk (the gateway's priming event,
 * `id: <cursor>` with empty data). Without the guard the SDK resumes again
 * from its cursor and gets `done 30`. With it, the guard has held the echo
 * back (a resumed stream is held until its first event after the cursor),
 * drops it with the broken body, and the SDK, which keeps only ids seen on
 * the current response, reconnects with no Last-Event-ID: a fresh GET
 * stream. The call waits out its timeout; the client now runs two
 * standalone GET loops that supersede each other. Exit 1 when reproduced.
 */
import { fileURLToPath } from 'node:url';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { createResumeGuard } from '@tether/resume-guard';
import { connectSdkClient, startMcpUpstream, startNatsServer, startServiceProcess } from '@tether/testing';

const useGuard = !process.argv.includes('--no-guard');
const nats = await startNatsServer();
const upstream = await startMcpUpstream({ eventStore: true });
const gateway = await startServiceProcess({
  name: 'gateway',
  command: process.execPath,
  args: [fileURLToPath(new URL('../../../services/gateway/dist/main.js', import.meta.url)), '--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--namespace', 'repro_echo', '--retry', '200'],
  readyLine: (json) => json.msg === 'listening',
});
const requests: string[] = [];
let cutPost = true;
let cutResume = true;
/** Below the guard: the network. */
const network = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const method = (init?.method ?? 'GET').toUpperCase();
  const cursor = new Headers(init?.headers).get('last-event-id');
  const isCall = method === 'POST' && typeof init?.body === 'string' && init.body.includes('tools/call');
  requests.push(`${method}${cursor === null ? '' : ` Last-Event-ID: ${cursor}`}${isCall ? ' (tools/call)' : ''}`);
  const res = await fetch(input, init);
  if (res.body === null || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return res;
  let breakAfter = Number.POSITIVE_INFINITY;
  if (isCall && cutPost) {
    cutPost = false;
    breakAfter = 3;
  } else if (cursor !== null && !cursor.includes('-0-') && cutResume) {
    cutResume = false;
    breakAfter = 1;
  }
  if (!Number.isFinite(breakAfter)) return res;
  const reader = res.body.getReader();
  let chunks = 0;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (chunks >= breakAfter) {
          controller.error(new Error('connection reset'));
          await reader.cancel().catch(() => undefined);
          return;
        }
        const r = await reader.read();
        if (r.done) return controller.close();
        chunks += 1;
        if (cursor !== null) console.log(`  resume chunk ${chunks}: ${JSON.stringify(new TextDecoder().decode(r.value))}`);
        controller.enqueue(r.value);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: res.status, headers: res.headers });
};
const guard = createResumeGuard({ fetch: network });
const sdk = await connectSdkClient(`http://127.0.0.1:${gateway.port}/mcp`, { fetch: (useGuard ? guard.fetch : network) as typeof fetch });
const progress: number[] = [];
const outcome = await sdk.client
  .callTool({ name: 'stream_progress', arguments: { count: 30, delayMs: 20 } }, CallToolResultSchema, { timeout: 8_000, onprogress: (p) => progress.push(p.progress) })
  .then(
    (r) => `result ${JSON.stringify(r.content)}`,
    (err: unknown) => `error: ${(err as Error).message}`,
  );
console.log(`${useGuard ? 'with' : 'without'} the resume guard: ${outcome}`);
console.log(`progress: ${progress.join(',')}`);
console.log('requests on the wire:');
for (const r of requests) console.log(`  ${r}`);
await sdk.close();
await gateway.kill();
await upstream.close();
await nats.cleanup();
const reproduced = !outcome.startsWith('result');
console.log(reproduced ? 'REPRODUCED: the call hung; the resume after the cut carried no Last-Event-ID' : 'not reproduced: the call completed');
process.exit(reproduced ? 1 : 0);
