import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectSdkClient, startNatsServer, startRoundRobinProxy, startServiceProcess } from '@tether/testing';
import type { NatsServer, RoundRobinProxy, ServiceProcess } from '@tether/testing';

/**
 * The Python example end to end, as examples/custom-server's test does it
 * for the TypeScript one: nats-server, the session-log service, two
 * instances of the Python server (which know each other only through the
 * log), a strict round-robin balancer, and the official SDK client. The
 * stubs are generated from proto/ into a fresh directory first, so they are
 * never stale.
 *
 * Needs Debian's python3-grpcio, python3-protobuf, protobuf-compiler and
 * protobuf-compiler-grpc (.ci/run installs them). Without them it is
 * skipped, loudly, naming them; under CI it fails instead.
 */
const PYTHON = '/usr/bin/python3';
const PROTOC = '/usr/bin/protoc';
const PLUGIN = '/usr/bin/grpc_python_plugin';
const HERE = fileURLToPath(new URL('..', import.meta.url));
const SESSION_LOG = fileURLToPath(new URL('../../../services/session-log/dist/main.js', import.meta.url));
const TOKEN = 'python-server-token-0123456789';

function missingPackages(): string[] {
  const missing: string[] = [];
  const imports = (module: string) => existsSync(PYTHON) && spawnSync(PYTHON, ['-c', `import ${module}`], { stdio: 'ignore' }).status === 0;
  if (!imports('grpc')) missing.push(`python3-grpcio (${PYTHON} cannot import grpc)`);
  if (!imports('google.protobuf')) missing.push(`python3-protobuf (${PYTHON} cannot import google.protobuf)`);
  if (!existsSync(PROTOC)) missing.push(`protobuf-compiler (no ${PROTOC})`);
  if (!existsSync(PLUGIN)) missing.push(`protobuf-compiler-grpc (no ${PLUGIN})`);
  return missing;
}

const missing = missingPackages();
if (missing.length > 0) {
  const text = `examples/python-server SKIPPED: missing Debian packages: ${missing.join('; ')}. apt-get install -y python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc (.ci/run installs them)`;
  process.stderr.write(`\n${'!'.repeat(80)}\n${text}\n${'!'.repeat(80)}\n`);
  // Under CI the packages are installed (.ci/run): missing ones are a failure there, not a skip.
  if (process.env['CI'] === 'true') it('has its Debian packages (CI)', () => expect(missing).toEqual([]));
  else it.skip(text, () => undefined);
}

/** The `id:` and `data:` of each SSE event in `text`. */
function sseEvents(text: string): { id: string; data: string }[] {
  return text
    .split('\n\n')
    .filter((block) => block.includes('id: '))
    .map((block) => ({
      id: /^id: (.*)$/m.exec(block)?.[1] ?? '',
      data: [...block.matchAll(/^data: (.*)$/gm)].map((m) => m[1]).join('\n'),
    }));
}

describe.skipIf(missing.length > 0)('Python server on the gRPC cursor API, two instances behind a round-robin balancer', () => {
  let gen: string;
  let nats: NatsServer;
  let sessionLog: ServiceProcess;
  const instances: ServiceProcess[] = [];
  let proxy: RoundRobinProxy;

  beforeAll(async () => {
    if (!existsSync(SESSION_LOG)) throw new Error(`${SESSION_LOG} is missing: run \`npx tsc -b\` first (npm test does)`);
    gen = mkdtempSync(join(tmpdir(), 'tether-python-gen-'));
    execFileSync('bash', [join(HERE, 'generate.sh'), gen], { stdio: ['ignore', 'ignore', 'inherit'] });
    nats = await startNatsServer();
    sessionLog = await startServiceProcess({
      name: 'session-log',
      command: process.execPath,
      // One Resume at a time per caller: a Resume the Python server failed
      // to cancel when its client left would hold the only slot (last test).
      args: [SESSION_LOG, '--port', '0', '--nats', nats.url, '--token', `python:${TOKEN}`, '--max-streams-per-caller', '1'],
      readyLine: (o) => o.msg === 'listening',
    });
    for (const name of ['a', 'b']) {
      instances.push(
        await startServiceProcess({
          name: `python-server-${name}`,
          command: PYTHON,
          args: [join(HERE, 'src/main.py'), '--port', '0', '--log', `127.0.0.1:${sessionLog.port}`, '--token', TOKEN, '--instance', name, '--gen', gen],
          env: { PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1' },
          readyLine: (o) => o.msg === 'listening',
        }),
      );
    }
    proxy = await startRoundRobinProxy(instances.map((i) => `http://127.0.0.1:${i.port}`));
  });
  afterAll(async () => {
    await proxy?.close();
    for (const instance of instances) await instance.stop();
    await sessionLog?.stop();
    await nats?.cleanup();
    if (gen !== undefined) rmSync(gen, { recursive: true, force: true });
  });

  const post = (sessionId: string, body: object, signal?: AbortSignal) =>
    fetch(`${proxy.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId },
      body: JSON.stringify(body),
      ...(signal === undefined ? {} : { signal }),
    });
  const resume = (sessionId: string, lastEventId: string, signal?: AbortSignal) =>
    fetch(`${proxy.url}/mcp`, {
      headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'last-event-id': lastEventId },
      ...(signal === undefined ? {} : { signal }),
    });

  it('a streaming tool call survives a cut connection: the SDK resumes on the other instance and gets every event once', async () => {
    const sdk = await connectSdkClient(`${proxy.url}/mcp`);
    // The SDK opens its standalone GET stream on its own (this server
    // answers 405); wait for it so the next requests alternate predictably.
    await expect.poll(() => proxy.history().some((r) => r.method === 'GET' && r.status === 405)).toBe(true);
    const progress: number[] = [];
    let cut = 0;
    const result = await sdk.client.callTool({ name: 'countdown', arguments: { count: 30, intervalMs: 40 } }, undefined, {
      timeout: 30_000,
      onprogress: (p) => {
        progress.push(p.progress);
        if (p.progress === 8) cut = proxy.cutAll();
      },
    });
    expect(cut).toBeGreaterThan(0);
    expect(result.content).toEqual([{ type: 'text', text: 'counted to 30' }]);
    // Every progress notification exactly once, in order: no replay from zero, no gap.
    expect(progress).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));

    const history = proxy.history();
    const resumeAt = history.findIndex((r) => r.method === 'GET' && r.lastEventId !== undefined);
    expect(resumeAt).toBeGreaterThan(0);
    const resumeRequest = history[resumeAt]!;
    const cutPost = history.slice(0, resumeAt).reverse().find((r) => r.method === 'POST')!;
    expect(resumeRequest.status).toBe(200);
    expect(resumeRequest.sessionId).toBe(cutPost.sessionId);
    expect(resumeRequest.target).not.toBe(cutPost.target);
    expect(sdk.errors.some((e) => /disconnected/i.test(e.message))).toBe(true);

    // DELETE → CloseSession: the session is gone for every instance.
    const sessionId = sdk.transport.sessionId!;
    await sdk.transport.terminateSession();
    await sdk.close();
    expect((await post(sessionId, { jsonrpc: '2.0', id: 9, method: 'tools/list' })).status).toBe(404);
  });

  it('a cursor the log cannot continue gets its verdict: 400 malformed, 404 for another session\'s event id (and the session ends)', async () => {
    const sdk = await connectSdkClient(`${proxy.url}/mcp`);
    const other = await connectSdkClient(`${proxy.url}/mcp`);
    const sessionId = sdk.transport.sessionId!;
    // A real event id of another session: the ids of a tool call's stream there.
    const call = await post(other.transport.sessionId!, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'countdown', arguments: { count: 2, intervalMs: 0 }, _meta: { progressToken: 1 } } });
    expect(call.headers.get('content-type')).toBe('text/event-stream');
    const events = sseEvents(await call.text());
    expect(events.map((e) => e.data === '' ? 'prime' : (JSON.parse(e.data) as { method?: string }).method ?? 'result')).toEqual(['prime', 'notifications/progress', 'notifications/progress', 'result']);
    const foreignId = events[1]!.id;

    const malformed = await resume(sessionId, 'not-an-event-id');
    expect([malformed.status, malformed.headers.get('tether-resume')]).toEqual([400, 'malformed']);
    const unknown = await resume('AAAAAAAAAAAAAAAAAAAAAA', foreignId);
    expect([unknown.status, unknown.headers.get('tether-resume')]).toEqual([404, 'unknown_session']);
    // The other session's cursor is still good there...
    const there = await resume(other.transport.sessionId!, foreignId);
    expect([there.status, sseEvents(await there.text()).length]).toEqual([200, 2]);
    // ...and refused here: another epoch.
    const foreign = await resume(sessionId, foreignId);
    expect([foreign.status, foreign.headers.get('tether-resume')]).toEqual([404, 'epoch_mismatch']);
    expect(await foreign.json()).toEqual({ error: 'resume refused', verdict: 'epoch_mismatch' });
    // The session was terminated: a spec client's next request gets 404 and starts over.
    expect((await post(sessionId, { jsonrpc: '2.0', id: 9, method: 'tools/list' })).status).toBe(404);
    await sdk.close();
    await other.transport.terminateSession();
    await other.close();
  });

  it('a client that leaves a resume waiting on live events gets its Resume call cancelled', async () => {
    const sdk = await connectSdkClient(`${proxy.url}/mcp`);
    const sessionId = sdk.transport.sessionId!;
    // One progress notification a minute away: a resume of this stream
    // waits on the log, writing nothing, until its client leaves.
    const running = new AbortController();
    const call = await post(sessionId, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'countdown', arguments: { count: 1, intervalMs: 60_000 }, _meta: { progressToken: 1 } } }, running.signal);
    const reader = call.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const primeId = sseEvents(first)[0]!.id;
    running.abort();

    for (let round = 1; round <= 3; round += 1) {
      // The service allows this caller one Resume at a time (see beforeAll):
      // each round gets its 200 only once the round before was cancelled
      // (until then the service refuses it, too_many_streams, and the
      // server answers 503).
      const leaving = new AbortController();
      const deadline = Date.now() + 10_000;
      const statuses: number[] = [];
      for (;;) {
        const response = await resume(sessionId, primeId, leaving.signal);
        statuses.push(response.status);
        if (response.status === 200 || Date.now() > deadline) break;
        await response.body?.cancel();
        await new Promise((r) => setTimeout(r, 50));
      }
      // A few 503s while the service lets the cancelled call go, then 200.
      expect(statuses.at(-1), `round ${round}: ${statuses.join(' ')}`).toBe(200);
      expect(statuses.filter((s) => s !== 503 && s !== 200), `round ${round}`).toEqual([]);
      leaving.abort();
    }
    await sdk.transport.terminateSession();
    await sdk.close();
  });
});
