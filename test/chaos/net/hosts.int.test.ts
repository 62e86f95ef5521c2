import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServerBinary } from '@tether/testing';
import { cleanupLeftovers, createHostNetwork, listNetns, missingPrerequisites, scratchDirOf } from './hosts.js';
import type { HostNetwork } from './hosts.js';
import { createNetFaults } from './nft.js';
import type { NetFaults } from './nft.js';

// The chaos harness's host network (`npm run chaos -- --net hosts`) on the
// real thing: namespaces, a bridge, a nats-server in one host, a client in
// another, nft partitions that cut it and heal, and nothing left behind.
// Needs root, iproute2 and nftables (.ci/run installs nftables). Where one
// is missing it is skipped, loudly, naming it; under CI it fails instead.

const missing = missingPrerequisites(true);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const HOLD = fileURLToPath(new URL('./hold-network.ts', import.meta.url));
if (missing.length > 0) {
  const text = `test/chaos/net/hosts.int.test.ts SKIPPED: ${missing.join('; ')}`;
  process.stderr.write(`\n${'!'.repeat(text.length)}\n${text}\n${'!'.repeat(text.length)}\n`);
}

describe('chaos host network: needs root, ip and nft', () => {
  it(`has them${missing.length === 0 ? '' : ` (MISSING: ${missing.join('; ')})`}`, () => {
    // Under CI the prerequisites are installed (.ci/run): missing ones are a failure there, not a skip.
    if (process.env['CI'] === 'true') expect(missing).toEqual([]);
  });
});

/** From `from`, connect to NATS at `address:4222`, read INFO, PING, want PONG within `timeoutMs`: `ok`, `timeout` or the error. */
async function probe(net: HostNetwork, from: string, address: string, timeoutMs = 1_500): Promise<string> {
  const script = `
    const s = require('net').connect(4222, ${JSON.stringify(address)});
    let got = '';
    const done = (w) => { process.stdout.write(w); process.exit(0); };
    setTimeout(() => done('timeout'), ${timeoutMs});
    s.on('error', (e) => done('error ' + e.code));
    s.on('data', (d) => { got += d; if (got.startsWith('INFO') && !got.includes('PONG')) s.write('PING\\r\\n'); if (got.includes('PONG')) done('ok'); });`;
  return (await net.exec(from, process.execPath, ['-e', script], timeoutMs + 5_000)).trim();
}

describe.skipIf(missing.length > 0)(`chaos host network: namespaces, a bridge, nft faults${missing.length === 0 ? '' : ` (SKIPPED: ${missing.join('; ')})`}`, () => {
  let net: HostNetwork;
  let faults: NetFaults;
  let nats: ChildProcess | undefined;

  beforeAll(async () => {
    net = await createHostNetwork({ hosts: ['nats', 'client', 'other'] });
    faults = createNetFaults(net);
    const bin = findNatsServerBinary();
    const wrapped = net.wrap('nats', bin, ['-a', '0.0.0.0', '-p', '4222', '-m', '8222']);
    nats = spawn(wrapped.command, wrapped.args, { stdio: 'ignore' });
    const until = Date.now() + 15_000;
    while ((await probe(net, 'client', net.host('nats').address, 500)) !== 'ok') {
      if (Date.now() > until) throw new Error('nats-server in its namespace did not answer from the client host within 15 s');
    }
  });

  afterAll(async () => {
    nats?.kill('SIGKILL');
    await faults?.healAll();
    await net?.destroy();
  });

  it('every host has its own namespace and address, and reaches the server through the switch', async () => {
    expect(net.hosts.map((h) => h.address)).toEqual(['10.77.0.10', '10.77.0.11', '10.77.0.12']);
    const listed = listNetns();
    for (const h of net.hosts) expect(listed).toContain(h.netns);
    expect(listed).toContain(net.switchNetns);
    // The server listens in its own host: the client host's loopback has nothing on 4222.
    expect(await probe(net, 'client', '127.0.0.1', 500)).toBe('error ECONNREFUSED');
    expect(await probe(net, 'client', net.host('nats').address)).toBe('ok');
    expect(await probe(net, 'other', net.host('nats').address)).toBe('ok');
  });

  it('a partition cuts client from server (and only them), and heals', async () => {
    const fault = await faults.partition(['client'], ['nats']);
    expect(fault.rules.map((r) => r.host).sort()).toEqual(['client', 'nats']);
    expect(await probe(net, 'client', net.host('nats').address)).toBe('timeout');
    expect(await probe(net, 'other', net.host('nats').address)).toBe('ok');
    expect(await fault.heal()).toEqual([]);
    expect(await probe(net, 'client', net.host('nats').address)).toBe('ok');
  });

  it('a one-way partition (drop by source) cuts it too, a 100% loss cuts it, duplication does not', async () => {
    const oneWay = await faults.oneWay(['client'], ['nats']);
    expect(oneWay.rules.map((r) => r.host)).toEqual(['nats']);
    expect(await probe(net, 'client', net.host('nats').address)).toBe('timeout');
    await oneWay.heal();
    const loss = await faults.loss('client', 'nats', 100);
    expect(await probe(net, 'client', net.host('nats').address)).toBe('timeout');
    await loss.heal();
    const dup = await faults.duplicate('client', 'nats', 50);
    expect(await probe(net, 'client', net.host('nats').address)).toBe('ok');
    await dup.heal();
    expect(faults.active).toEqual([]);
    expect(await probe(net, 'client', net.host('nats').address)).toBe('ok');
  });

  it('destroy removes every namespace it made', async () => {
    nats?.kill('SIGKILL');
    nats = undefined;
    const report = await net.destroy();
    expect(report.failed).toEqual([]);
    expect(report.removed).toHaveLength(4);
    expect(listNetns().filter((n) => n.includes(net.runId))).toEqual([]);
    expect(existsSync(scratchDirOf(net.runId))).toBe(false);
  });

  it('a SIGTERMed run removes its network; a SIGKILLed run leaves one that cleanupLeftovers removes', async () => {
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      const child = spawn(process.execPath, ['--import', 'tsx', HOLD, 'a', 'b'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]!);
        });
        child.once('exit', (code) => reject(new Error(`hold-network exited (${code}) before printing its network`)));
      });
      const { runId } = JSON.parse(line) as { runId: string };
      expect(listNetns().filter((n) => n.includes(runId))).toHaveLength(3);
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill(signal);
      await exited;
      if (signal === 'SIGTERM') {
        expect(listNetns().filter((n) => n.includes(runId))).toEqual([]);
      } else {
        expect(listNetns().filter((n) => n.includes(runId))).toHaveLength(3);
        const report = await cleanupLeftovers();
        expect(report.removed.filter((n) => n.includes(runId))).toHaveLength(3);
        expect(listNetns().filter((n) => n.includes(runId))).toEqual([]);
      }
    }
  });
});
