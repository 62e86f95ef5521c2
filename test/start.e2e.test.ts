import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), 'tether-start-'));
// What `npm start` runs after its `tsc -b` (npm test has built already).
const child = spawn('bash', ['scripts/start.sh'], {
  cwd: root,
  detached: true,
  env: { ...process.env, TETHER_PORT: '0', TETHER_GRPC_PORT: '0', TETHER_DATA_DIR: dataDir, TETHER_NATS_URL: '' },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
child.stdout.on('data', (c: Buffer) => (output += c.toString()));
child.stderr.on('data', (c: Buffer) => (output += c.toString()));
const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

afterAll(async () => {
  if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const match = output.match(pattern);
    if (match !== null) return match;
    if (Date.now() > until || child.exitCode !== null) throw new Error(`npm start never printed ${pattern}; output:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('npm start', () => {
  it('brings up the stack, says so, and every printed endpoint answers; Ctrl-C stops it all', async () => {
    await waitFor(/press Ctrl-C to stop/, 60_000);
    // On Node 24 whatever ran this test (the machine's node may be older): scripts/node.sh 24 fetched it.
    expect(output).toMatch(/\[tether\] node +v24\./);
    expect(output).toMatch(/self-check passed: a stream recorded via gateway A resumed on gateway B/);
    const gateways = [...output.matchAll(/gateway-[ab] +(http:\/\/127\.0\.0\.1:\d+\/mcp)/g)].map((m) => m[1]!);
    expect(gateways).toHaveLength(2);
    for (const url of gateways) {
      expect((await fetch(url.replace('/mcp', '/healthz'))).status).toBe(200);
      const init = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } }),
      });
      expect(init.status).toBe(200);
      expect(init.headers.get('mcp-session-id')).toMatch(/^[A-Za-z0-9_-]{22}$/);
      await init.arrayBuffer();
    }
    const upstream = output.match(/upstream +(http:\/\/127\.0\.0\.1:\d+\/mcp)/)![1]!;
    expect((await fetch(upstream, { method: 'GET' })).status).toBeGreaterThanOrEqual(400);
    const grpcPort = Number(output.match(/session-log grpc:\/\/127\.0\.0\.1:(\d+)/)![1]);
    await new Promise<void>((resolve, reject) => {
      const socket = connect(grpcPort, '127.0.0.1', () => {
        socket.end();
        resolve();
      });
      socket.on('error', reject);
    });
    expect(output).toMatch(/npx tether-probe http:\/\/127\.0\.0\.1:\d+\/mcp --via http:\/\/127\.0\.0\.1:\d+\/mcp/);

    process.kill(-child.pid!, 'SIGINT');
    expect(await exited).toBe(0);
    await expect(fetch(gateways[0]!.replace('/mcp', '/healthz'))).rejects.toThrow();
  });
});
