import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager, type JetStreamClient, type PubAck } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  findNatsServerBinary,
  isNatsServerNotFound,
  isNatsServerTooOld,
  MIN_NATS_SERVER_VERSION,
  NatsServerStartError,
  NatsServerTooOldError,
  natsServerVersion,
  natsVersionAtLeast,
  startNatsCluster,
  startNatsServer,
  TestingErrorCodes,
  type NatsCluster,
  type NatsServer,
} from '@tether/testing';
import { resolveNatsServerBinary } from '../src/find-binary.js';

// Real nats-server processes, no mocks. Each describe owns its servers because
// several of them kill and restart.

const connections: NatsConnection[] = [];
async function connectTo(servers: string | readonly string[]): Promise<NatsConnection> {
  const nc = await connect({ servers: typeof servers === 'string' ? servers : [...servers], maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  connections.push(nc);
  return nc;
}
async function closeConnections(): Promise<void> {
  await Promise.all(connections.splice(0).map((nc) => nc.close()));
}

function pidIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Publish with ack, retrying while a stream leader is being (re-)elected. */
async function publishWithRetry(js: JetStreamClient, subject: string, data: string, budgetMs = 30_000): Promise<PubAck> {
  const deadline = Date.now() + budgetMs;
  for (;;) {
    try {
      // The message id makes a retry of a publish that landed after all return its first ack, not a second copy.
      return await js.publish(subject, data, { timeout: 2_000, msgID: data });
    } catch (err) {
      // During an election the client reports no responders as "jetstream is
      // not enabled", or times out. Anything still failing at the deadline is real.
      if (Date.now() > deadline) throw err;
      await new Promise((done) => setTimeout(done, 200));
    }
  }
}

describe('findNatsServerBinary', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'tether-find-bin-'));
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  /** An executable that answers `--version` like nats-server `version` does. */
  async function fakeServer(name: string, version: string): Promise<string> {
    const path = join(scratch, name);
    await writeFile(path, `#!/bin/sh\necho "nats-server: v${version}"\n`);
    await chmod(path, 0o755);
    return path;
  }

  /** A stand-in for scripts/nats-server.sh: prints `path`, or says `why` on stderr and exits 1. */
  async function fakeScript(name: string, answer: { path: string } | { why: string }): Promise<string> {
    const path = join(scratch, name);
    await writeFile(path, 'path' in answer ? `echo '${answer.path}'\n` : `echo '${answer.why}' >&2\nexit 1\n`);
    return path;
  }

  it('without NATS_SERVER_BIN, finds a current server (>= 2.11) through scripts/nats-server.sh, never PATH\'s', async () => {
    vi.stubEnv('NATS_SERVER_BIN', '');
    const bin = findNatsServerBinary();
    const version = natsServerVersion(bin);
    process.stdout.write(`findNatsServerBinary: nats-server ${version} at ${bin}\n`);
    expect((await stat(bin)).mode & 0o111).not.toBe(0);
    expect(natsVersionAtLeast(version, MIN_NATS_SERVER_VERSION.major, MIN_NATS_SERVER_VERSION.minor)).toBe(true);
  });

  it('NATS_SERVER_BIN pointing at a missing file is a clear nats_server_not_found error', async () => {
    const missing = join(scratch, 'no-such-nats-server');
    vi.stubEnv('NATS_SERVER_BIN', missing);
    let caught: unknown;
    try {
      findNatsServerBinary();
    } catch (err) {
      caught = err;
    }
    expect(isNatsServerNotFound(caught)).toBe(true);
    const message = (caught as Error).message;
    expect(message).toContain(missing);
    expect(message).toContain('does not exist');
    expect(message).toContain('bash scripts/nats-server.sh current');
    expect(message).toContain('https://github.com/nats-io/nats-server/releases');
    expect(message).toContain('NATS_SERVER_BIN=/path/to/nats-server');
    // Debian 12's package is 2.9.10: never the advice.
    expect(message).not.toContain('apt-get install');
    // The factories surface the same error before spawning anything.
    await expect(startNatsServer()).rejects.toMatchObject({ code: TestingErrorCodes.NatsServerNotFound });
    await expect(startNatsCluster()).rejects.toMatchObject({ code: TestingErrorCodes.NatsServerNotFound });
  });

  it('NATS_SERVER_BIN pointing at a non-executable file is rejected, not ignored', async () => {
    const notExecutable = join(scratch, 'nats-server-not-exec');
    await writeFile(notExecutable, '#!/bin/sh\n');
    await chmod(notExecutable, 0o644);
    expect(() => resolveNatsServerBinary({ env: { NATS_SERVER_BIN: notExecutable }, script: '/nonexistent' })).toThrow(/is not executable/);
  });

  it('a NATS_SERVER_BIN older than 2.11 is refused with its version, before anything starts', async () => {
    const old = await fakeServer('nats-server-2.9.10', '2.9.10');
    vi.stubEnv('NATS_SERVER_BIN', old);
    let caught: unknown;
    try {
      findNatsServerBinary();
    } catch (err) {
      caught = err;
    }
    expect(isNatsServerTooOld(caught)).toBe(true);
    expect(caught).toMatchObject({ code: 'nats_server_too_old', bin: old, version: '2.9.10', minimum: '2.11' });
    expect((caught as Error).message).toContain(`NATS_SERVER_BIN=${old} is nats-server 2.9.10`);
    expect((caught as Error).message).toContain('needs 2.11 or later');
    await expect(startNatsServer()).rejects.toBeInstanceOf(NatsServerTooOldError);
    await expect(startNatsCluster()).rejects.toMatchObject({ code: TestingErrorCodes.NatsServerTooOld });
    // 2.10 is refused too; 2.11.0 and anything later pass.
    const older = await fakeServer('nats-server-2.10.29', '2.10.29');
    expect(() => resolveNatsServerBinary({ env: { NATS_SERVER_BIN: older }, script: '/nonexistent' })).toThrow(/is nats-server 2\.10\.29/);
    const recent = await fakeServer('nats-server-2.11.0', '2.11.0');
    expect(resolveNatsServerBinary({ env: { NATS_SERVER_BIN: recent }, script: '/nonexistent' })).toBe(recent);
  });

  it('without NATS_SERVER_BIN: what the script prints, refused if it is old, and the script\'s reason when it finds none', async () => {
    const recent = await fakeServer('nats-server-2.15.1', '2.15.1');
    const old = await fakeServer('nats-server-old', '2.9.10');
    // PATH is never searched, however it is set.
    const env = { PATH: `${scratch}:/usr/sbin` };
    const printsRecent = await fakeScript('prints-recent.sh', { path: recent });
    const printsOld = await fakeScript('prints-old.sh', { path: old });
    const findsNone = await fakeScript('finds-none.sh', { why: 'the system nats-server is 2.9.10, too old' });
    expect(resolveNatsServerBinary({ env, script: printsRecent })).toBe(recent);
    expect(() => resolveNatsServerBinary({ env, script: printsOld })).toThrow(/is nats-server 2\.9\.10/);
    let caught: unknown;
    try {
      resolveNatsServerBinary({ env, script: findsNone });
    } catch (err) {
      caught = err;
    }
    expect(isNatsServerNotFound(caught)).toBe(true);
    expect((caught as Error).message).toContain('found no nats-server 2.11 or later');
    expect((caught as Error).message).toContain('the system nats-server is 2.9.10, too old');
    expect(() => resolveNatsServerBinary({ env, script: join(scratch, 'no-such-script.sh') })).toThrow(/does not exist/);
  });
});

describe('startNatsServer: single node', () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    await closeConnections();
    await server.cleanup();
  });

  it('starts on random loopback ports and accepts a JetStream publish with ack', async () => {
    expect(server.url).toBe(`nats://127.0.0.1:${server.port}`);
    expect(server.port).toBeGreaterThan(0);
    expect(server.port).not.toBe(4222);
    expect(server.monitorPort).toBeGreaterThan(0);
    expect(server.pid).toBeTypeOf('number');
    // Below the kernel's ephemeral range: no outgoing connection can take them while the server is down for a restart.
    const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    expect(server.port).toBeLessThan(ephemeralLow);
    expect(server.monitorPort).toBeLessThan(ephemeralLow);

    const nc = await connectTo(server.url);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'single', subjects: ['single.>'] });
    const ack = await jetstream(nc).publish('single.a', 'hello');
    expect(ack).toMatchObject({ stream: 'single', seq: 1 });
  });

  it('kill() then restart() keeps the port, the stream and its messages', async () => {
    const before = { port: server.port, monitorPort: server.monitorPort, storeDir: server.storeDir, pid: server.pid };
    const nc = await connectTo(server.url);
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'durable', subjects: ['durable.>'] });
    for (const word of ['one', 'two', 'three']) await js.publish('durable.x', word);

    await server.kill();
    expect(server.pid).toBeUndefined();
    expect(pidIsAlive(before.pid ?? -1)).toBe(false);

    await server.restart();
    expect(server.pid).toBeTypeOf('number');
    expect(server.pid).not.toBe(before.pid);
    expect({ port: server.port, monitorPort: server.monitorPort, storeDir: server.storeDir }).toEqual({
      port: before.port,
      monitorPort: before.monitorPort,
      storeDir: before.storeDir,
    });

    // A fresh connection: the recovered store is what the server now has.
    const nc2 = await connectTo(server.url);
    const jsm2 = await jetstreamManager(nc2);
    const info = await jsm2.streams.info('durable');
    expect(info.state.messages).toBe(3);
    const words: string[] = [];
    for (let seq = 1; seq <= 3; seq += 1) words.push((await jsm2.streams.getMessage('durable', { seq }))?.string() ?? `<missing ${seq}>`);
    expect(words).toEqual(['one', 'two', 'three']);
    expect(await jetstream(nc2).publish('durable.x', 'four')).toMatchObject({ seq: 4 });
  });

  it('stop() waits for exit and leaves pid undefined; stop() again is a no-op', async () => {
    const pid = server.pid;
    await server.stop();
    expect(server.pid).toBeUndefined();
    expect(pidIsAlive(pid ?? -1)).toBe(false);
    await server.stop();
    await server.kill();
    await server.restart();
    expect(server.pid).toBeTypeOf('number');
  });
});

describe('startNatsServer: lifecycle edges', () => {
  it('cleanup() removes the temp store dir, is idempotent, and restart() afterwards is nats_server_disposed', async () => {
    const server = await startNatsServer({ jetstream: false });
    const dir = server.storeDir;
    await Promise.all([server.cleanup(), server.cleanup()]);
    await server.cleanup();
    expect(server.pid).toBeUndefined();
    await expect(stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(server.restart()).rejects.toMatchObject({ code: TestingErrorCodes.NatsServerDisposed });
  });

  it('a store dir the caller passes is used and kept', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tether-own-store-'));
    try {
      const server = await startNatsServer({ storeDir: dir });
      expect(server.storeDir).toBe(dir);
      await server.cleanup();
      expect((await stat(join(dir, 'jetstream'))).isDirectory()).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a server that exits during startup fails with nats_server_start_failed and its stderr tail', async () => {
    const err: unknown = await startNatsServer({ jetstream: false, extraArgs: ['--no_such_flag'] }).then(
      () => new Error('expected startNatsServer to fail'),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NatsServerStartError);
    expect(err).toMatchObject({ code: TestingErrorCodes.NatsServerStartFailed });
    expect((err as NatsServerStartError).stderrTail.join('\n')).toContain('flag provided but not defined');
    expect((err as Error).message).toContain('flag provided but not defined');
  });

  it('a server not ready in time fails with nats_server_ready_timeout, and the process is gone', async () => {
    // `-m 0` (the last -m wins) turns monitoring off, so its ports file never
    // names a monitor port and the server is never ready to the kit. With
    // the 1 ms budget alone, a loaded machine could let the server win: the
    // kit always probes once, and each first probe could find it ready.
    const err: unknown = await startNatsServer({ readyTimeoutMs: 1, extraArgs: ['-m', '0'] }).then(
      () => new Error('expected startNatsServer to time out'),
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: TestingErrorCodes.NatsServerReadyTimeout });
    expect((err as Error).message).toContain('not ready after 1ms');
    const pid = (err as NatsServerStartError).pid;
    expect(pid).toBeTypeOf('number');
    expect(pidIsAlive(pid ?? -1)).toBe(false);
  });
});

describe('startup failures: a server that dies, a port found taken', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'tether-cluster-fail-'));
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  /** A NATS_SERVER_BIN that makes node n2 die at startup `failures` times, then runs the real server. */
  async function wrapper(name: string, failures: number, stderrLine: string): Promise<string> {
    const counter = join(scratch, `${name}.count`);
    const script = join(scratch, name);
    await writeFile(
      script,
      [
        '#!/bin/sh',
        'case "$*" in',
        `  */n2/nats-server.conf*)`,
        `    n=$(cat '${counter}' 2>/dev/null || echo 0)`,
        `    if [ "$n" -lt ${failures} ]; then echo $((n + 1)) > '${counter}'; echo '${stderrLine}' >&2; exit 1; fi;;`,
        'esac',
        `exec '${findNatsServerBinary()}' "$@"`,
        '',
      ].join('\n'),
    );
    await chmod(script, 0o755);
    return script;
  }

  it('a node that dies fails the whole cluster fast with nats_cluster_start_failed and the node\'s stderr', async () => {
    vi.stubEnv('NATS_SERVER_BIN', await wrapper('dies', 99, 'n2 cannot start: simulated'));
    const startedAt = Date.now();
    const err: unknown = await startNatsCluster({ readyTimeoutMs: 30_000 }).then(
      () => new Error('expected startNatsCluster to fail'),
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: TestingErrorCodes.NatsClusterStartFailed });
    expect((err as Error).cause).toBeInstanceOf(NatsServerStartError);
    expect((err as Error).message).toContain('n2 cannot start: simulated');
    // Fail fast: n1 and n3 are killed rather than waiting out readyTimeoutMs for n2.
    expect(Date.now() - startedAt).toBeLessThan(20_000);
  });

  it('startNatsServer: a port it chose, found taken, is chosen again at the first start; a port the caller gave is not', async () => {
    const counter = join(scratch, 'count');
    const script = join(scratch, 'nats-server-taken-once');
    await writeFile(
      script,
      [
        '#!/bin/sh',
        '# A start is `-a 127.0.0.1 -p <port> ...` ($4 the client port); `--version` passes.',
        `n=$(cat '${counter}' 2>/dev/null || echo 0)`,
        `if [ "$3" = -p ] && [ "$n" -lt 1 ]; then echo $((n + 1)) > '${counter}'; echo "listen tcp 127.0.0.1:$4: bind: address already in use" >&2; exit 1; fi`,
        `exec '${findNatsServerBinary()}' "$@"`,
        '',
      ].join('\n'),
    );
    await chmod(script, 0o755);
    vi.stubEnv('NATS_SERVER_BIN', script);
    const server = await startNatsServer();
    try {
      expect(server.pid).toBeTypeOf('number');
    } finally {
      await server.cleanup();
    }

    await rm(counter);
    const err: unknown = await startNatsServer({ port: server.port }).then(
      () => new Error('expected the start on a given, taken port to fail'),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NatsServerStartError);
    expect((err as NatsServerStartError).stderrTail.join('\n')).toContain('address already in use');
  });

  it('a route port taken in the pick-then-bind race is retried with fresh ports', async () => {
    vi.stubEnv('NATS_SERVER_BIN', await wrapper('port-race', 1, 'listen tcp 127.0.0.1:1: bind: address already in use'));
    const cluster = await startNatsCluster();
    try {
      expect(cluster.servers.every((server) => server.pid !== undefined)).toBe(true);
    } finally {
      await cluster.cleanup();
    }
  });
});

describe('startNatsCluster: 3 nodes', () => {
  let cluster: NatsCluster;
  beforeAll(async () => {
    cluster = await startNatsCluster();
  });
  afterAll(async () => {
    await closeConnections();
    await cluster.cleanup();
  });

  it('creates an R3 stream right away, keeps publishing when the stream leader is killed, and the node rejoins', async () => {
    expect(cluster.servers).toHaveLength(3);
    expect(new Set(cluster.urls).size).toBe(3);

    const nc = await connectTo(cluster.urls);
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    await jsm.streams.add({ name: 'r3', subjects: ['r3.>'], num_replicas: 3 });
    // Right after the create, the stream's subject may not be served yet on this client's server ('no responders' under a loaded CI run): retried.
    for (let i = 1; i <= 5; i += 1) expect(await publishWithRetry(js, 'r3.a', `m${i}`)).toMatchObject({ seq: i });

    // Kill the node that leads the stream: the worst case for a writer.
    const leaderName = (await jsm.streams.info('r3')).cluster?.leader ?? '';
    const victimIndex = Number(/-n(\d+)$/.exec(leaderName)?.[1]) - 1;
    const victim = cluster.servers[victimIndex];
    if (victim === undefined) throw new Error(`cannot map stream leader ${leaderName} to a node`);
    await victim.kill();

    expect(await publishWithRetry(js, 'r3.a', 'm6')).toMatchObject({ seq: 6 });
    const during = await jsm.streams.info('r3');
    expect(during.cluster?.leader).not.toBe(leaderName);

    await victim.restart();
    expect(victim.pid).toBeTypeOf('number');
    expect(await publishWithRetry(js, 'r3.a', 'm7')).toMatchObject({ seq: 7 });

    // The restarted node catches up: every replica reports current with all 7 messages.
    await expect
      .poll(
        async () => {
          const info = await jsm.streams.info('r3');
          return { messages: info.state.messages, replicas: (info.cluster?.replicas ?? []).map((r) => r.current) };
        },
        { timeout: 20_000, interval: 250 },
      )
      .toEqual({ messages: 7, replicas: [true, true] });

    // Clients connected to the restarted node reach JetStream again.
    const viaVictim = await connectTo(victim.url);
    const msg = await (await jetstreamManager(viaVictim)).streams.getMessage('r3', { seq: 6 });
    expect(msg?.string()).toBe('m6');
  });
});
