/**
 * The nginx configuration users deploy (deploy/nginx/tether.conf, unchanged)
 * on Debian's nginx, in front of two real gateway processes on a real
 * nats-server, with the official SDK as upstream and as client.
 *
 * How a cross-instance resume is forced: the client's fetch cuts its own
 * SSE streams after N events (test/deploy/cut-fetch.ts), which drops the
 * client's socket; nginx logs the request as not completed
 * (`$request_completion` empty), with the gateway it used.
 * The SDK reconnects with Last-Event-ID through nginx, whose round robin
 * sends consecutive requests to alternating gateways: after two cuts, the
 * resumes have been served by both gateways, so at least one resume ran on an
 * instance that is not the stream's writer. Both the access log
 * ($upstream_addr) and the gateways' own logs show it.
 */
import { sessionTag } from '@tether/telemetry';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectSdkClient, startMcpUpstream, startNatsServer, startServiceProcess, UpstreamTools } from '@tether/testing';
import type { McpUpstream, NatsServer, ServiceProcess } from '@tether/testing';
import { createCuttingFetch } from './cut-fetch.js';
import { findNginx, startNginx } from './nginx-harness.js';
import type { AccessEntry, NginxProcess } from './nginx-harness.js';
import { startUpstreamTap } from './upstream-tap.js';
import type { UpstreamTap } from './upstream-tap.js';

const GATEWAY_MAIN = fileURLToPath(new URL('../../services/gateway/dist/main.js', import.meta.url));
const NGINX = findNginx();
const SKIP_TITLE = 'SKIPPED: nginx is not installed, so deploy/nginx/tether.conf is NOT tested (apt-get install -y nginx; .ci/run installs it)';
if (NGINX === undefined) console.warn(`\n[test/deploy] ${SKIP_TITLE}\n`);
const suite = NGINX === undefined ? describe.skip : describe;

interface Gateway {
  readonly name: string;
  readonly process: ServiceProcess;
  /** `127.0.0.1:<port>`, as nginx's $upstream_addr shows it. */
  readonly addr: string;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

suite(NGINX === undefined ? SKIP_TITLE : 'deploy/nginx/tether.conf on Debian nginx in front of two gateways', () => {
  let nats: NatsServer;
  let upstream: McpUpstream;
  let tap: UpstreamTap;
  const gateways: Gateway[] = [];
  let nginx: NginxProcess;
  let url: string;

  beforeAll(async () => {
    nats = await startNatsServer();
    upstream = await startMcpUpstream({ eventStore: true });
    tap = await startUpstreamTap(upstream.url);
    for (const name of ['gw-a', 'gw-b']) {
      const proc = await startServiceProcess({
        name,
        command: process.execPath,
        args: [
          GATEWAY_MAIN,
          ...['--port', '0', '--nats', nats.url, '--upstream', tap.url, '--instance-id', name],
          // No heartbeats during the tests: an idle stream must survive on
          // tether.conf's read timeout alone. Short retry hint: fast resumes.
          ...['--heartbeat', '1m', '--retry', '200', '--drain-timeout', '5s'],
        ],
        readyLine: (json) => json.msg === 'listening',
      });
      gateways.push({ name, process: proc, addr: `127.0.0.1:${proc.port}` });
    }
    nginx = await startNginx(NGINX!, gateways.map((g) => g.addr));
    url = `${nginx.origin}/mcp`;
  });

  afterAll(async () => {
    await nginx?.stop();
    await Promise.all(gateways.map((g) => g.process.stop('SIGKILL', 2_000).catch(() => undefined)));
    await tap?.close();
    await upstream?.close();
    await nats?.cleanup();
  });

  const gatewayAt = (addr: string | undefined) => gateways.find((g) => g.addr === addr);
  // Logs name a session by its tag, never its id.
  const logged = (g: Gateway, msg: string, sessionId: string) => g.process.stdoutJson.filter((j) => j.msg === msg && j.sessionId === sessionTag(sessionId));
  const newEntries = (before: number) => nginx.accessLog().slice(before);

  it('a tool-call stream cut twice resumes through nginx on the other gateway: 200 progress events exactly once, the first one before the last is produced', async () => {
    const logStart = nginx.accessLog().length;
    tap.reset();
    const cutter = createCuttingFetch([40, 40]);
    const sdk = await connectSdkClient(url, { fetch: cutter.fetch });
    const sessionId = sdk.transport.sessionId!;
    const progress: number[] = [];
    const arrivals: number[] = [];
    const result = await sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 200, delayMs: 5 } }, CallToolResultSchema, {
      onprogress: (p) => {
        progress.push(p.progress);
        arrivals.push(Date.now());
      },
      timeout: 60_000,
    });

    expect(cutter.cuts.map((c) => c.kind)).toEqual(['post', 'resume']);
    expect(progress).toEqual(range(200));
    expect(result.content).toEqual([{ type: 'text', text: 'done 200' }]);
    // Unbuffered: progress 1 reached the client before progress 200 left the upstream.
    expect(arrivals[0]!).toBeLessThan(tap.producedAt(200)!);

    // nginx's view: the POST was cut short on the writer; the resumes
    // (GET + Last-Event-ID) went to both gateways, so one is not the writer.
    const entries = await until('the final resume in the access log', () => {
      const all = newEntries(logStart);
      return all.filter((e) => e.method === 'GET' && e.lastEventId !== undefined).length >= 2 ? all : undefined;
    });
    const post = entries.filter((e) => e.method === 'POST' && !e.completed);
    expect(post, `the cut tool-call POST in:\n${entries.map((e) => e.line).join('\n')}`).toHaveLength(1);
    const writer = gatewayAt(post[0]!.upstream);
    expect(writer, `writer of ${post[0]!.line}`).toBeDefined();
    const resumes = entries.filter((e) => e.method === 'GET' && e.lastEventId !== undefined);
    expect(new Set(resumes.map((e) => e.upstream))).toEqual(new Set(gateways.map((g) => g.addr)));
    expect(entries.filter((e) => e.status >= 500), 'no 5xx through nginx').toEqual([]);

    // The gateways' view: the other instance classified a resume of this
    // session as `resumed`, and the writer recorded the whole stream.
    const other = gateways.find((g) => g !== writer)!;
    expect(logged(other, 'resume classified', sessionId).map((j) => j.verdict)).toContain('resumed');
    await writer!.process.waitForLine((j) => j.msg === 'stream recorded' && j.sessionId === sessionTag(sessionId), { includePast: true });
    expect(writer!.process.stdoutLines.some((l) => l.includes(sessionId))).toBe(false);

    await sdk.transport.terminateSession();
    await sdk.close();
  });

  it('events pass one by one and an idle stream outlives the main config (gzip on, buffering on, X-Accel-Buffering ignored, 1 s read timeout)', async () => {
    const logStart = nginx.accessLog().length;
    tap.reset();
    const sdk = await connectSdkClient(url);
    const arrivals: number[] = [];
    const result = await sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 3, delayMs: 1_500 } }, CallToolResultSchema, {
      onprogress: () => void arrivals.push(Date.now()),
      timeout: 30_000,
    });
    expect(result.content).toEqual([{ type: 'text', text: 'done 3' }]);
    expect(arrivals).toHaveLength(3);
    // Each event reached the client before the next one left the upstream
    // (1.5 s later): one by one, not in a burst at the end.
    expect(arrivals[0]!).toBeLessThan(tap.producedAt(2)!);
    expect(arrivals[1]!).toBeLessThan(tap.producedAt(3)!);
    // 1.5 s of silence on the upstream connection did not end the response:
    // no reconnect happened, and nothing failed.
    expect(sdk.errors).toEqual([]);
    const entries = await until('the tool call in the access log', () => {
      const all = newEntries(logStart);
      return all.some((e) => e.method === 'POST' && e.status === 200 && e.requestTimeS > 4) ? all : undefined;
    });
    expect(entries.filter((e) => e.lastEventId !== undefined)).toEqual([]);
    expect(entries.filter((e) => e.status >= 500)).toEqual([]);
    await sdk.transport.terminateSession();
    await sdk.close();
  });

  it('SIGTERM on the writer mid-stream (a rolling deploy): it drains, nginx skips it, the client finishes on the other gateway', async () => {
    const logStart = nginx.accessLog().length;
    const cutter = createCuttingFetch([30]);
    const sdk = await connectSdkClient(url, { fetch: cutter.fetch });
    const sessionId = sdk.transport.sessionId!;
    const progress: number[] = [];
    let drained: Promise<unknown> | undefined;
    let writer: Gateway | undefined;
    const result = await sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 200, delayMs: 15 } }, CallToolResultSchema, {
      onprogress: (p) => {
        progress.push(p.progress);
        if (p.progress === 80) {
          // The cut POST's access-log line names the writer.
          const cutPost = newEntries(logStart).find((e: AccessEntry) => e.method === 'POST' && !e.completed);
          writer = gatewayAt(cutPost?.upstream);
          drained = writer?.process.stop('SIGTERM', 15_000);
        }
      },
      timeout: 60_000,
    });
    expect(writer, 'the writer was known from the access log at progress 80').toBeDefined();
    expect(progress).toEqual(range(200));
    expect(result.content).toEqual([{ type: 'text', text: 'done 200' }]);
    const exit = (await drained) as { code: number | null };
    expect(exit.code, 'the writer drained and exited cleanly').toBe(0);
    // The writer stopped taking requests but finished recording the stream.
    expect(writer!.process.stdoutJson.some((j) => j.msg === 'draining')).toBe(true);
    expect(logged(writer!, 'stream recorded', sessionId).length).toBeGreaterThan(0);

    // With one gateway gone, nginx moves every request to the survivor.
    const echoStart = nginx.accessLog().length;
    for (let i = 0; i < 4; i += 1) {
      const echo = await sdk.client.callTool({ name: UpstreamTools.Echo, arguments: { text: `after drain ${i}` } }, CallToolResultSchema);
      expect(echo.content).toEqual([{ type: 'text', text: `after drain ${i}` }]);
    }
    const survivor = gateways.find((g) => g !== writer)!;
    // (An entry is written when nginx finishes the response, which can be
    // just after the client saw the result.)
    const after = await until('the echo calls in the access log', () => {
      const posts = newEntries(echoStart).filter((e) => e.method === 'POST');
      return posts.length >= 4 ? posts : undefined;
    });
    expect(after.map((e) => [e.status, e.upstream])).toEqual(Array.from({ length: 4 }, () => [200, survivor.addr]));
    // Once the writer stopped listening, a request offered to it was refused
    // and passed on to the survivor (after which nginx skips the writer for
    // fail_timeout); the client never saw an error.
    const all = newEntries(logStart);
    expect(all.some((e) => e.upstreams[0] === writer!.addr && e.upstream === survivor.addr)).toBe(true);
    expect(all.filter((e) => e.status >= 500)).toEqual([]);
    await sdk.transport.terminateSession();
    await sdk.close();
  });
});
