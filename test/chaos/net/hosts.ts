/**
 * A host network for one chaos run, from Linux network namespaces: every
 * host (a NATS node, a gateway, an upstream, the clients) gets a namespace
 * of its own with one interface, `eth0`, whose veth peer is a port of a
 * bridge in a "switch" namespace the run creates. Nothing is added to the
 * machine's own namespace: the veth pairs are created inside the switch and
 * moved straight into their hosts, so two runs never meet, even with the
 * same addresses (each run's hosts see only their own switch).
 *
 *   tchaos-<run>-sw:  br0 ── v-nats1 ╌╌ eth0 (tchaos-<run>-nats1, 10.77.0.11/24)
 *                         ── v-gw1   ╌╌ eth0 (tchaos-<run>-gw1,   10.77.0.21/24) …
 *
 * Names: `tchaos-<run>-<host>`, `<run>` six random hex digits. A state file
 * (`/run/tether-chaos-net/<run>.json`) names the owner process, so
 * {@link cleanupLeftovers} removes the namespaces of runs whose owner is gone
 * and never those of a live run. {@link HostNetwork.destroy} removes all of
 * this run's, also on SIGINT/SIGTERM/SIGHUP and at exit; deleting a namespace
 * removes its veth end (and so the pair) and its nft tables.
 *
 * Needs root and iproute2's `ip`. Anything the system refuses is thrown as a
 * {@link NetError} carrying the command and its stderr.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Every namespace a run creates starts with this. */
export const NETNS_PREFIX = 'tchaos-';
const STATE_DIR = '/run/tether-chaos-net';
/** The run's private test subnet (inside its own switch; never routed anywhere). */
const SUBNET = '10.77.0';
const EXEC_TIMEOUT_MS = 15_000;

export const NetErrorCode = {
  /** A prerequisite is missing: not root, no `ip`, no `nft`. */
  Unavailable: 'net_unavailable',
  /** A command the harness ran was refused or failed (its stderr is in the message). */
  CommandFailed: 'net_command_failed',
  /** A host name the network does not have. */
  UnknownHost: 'net_unknown_host',
} as const;
export type NetErrorCode = (typeof NetErrorCode)[keyof typeof NetErrorCode];

export class NetError extends Error {
  readonly code: NetErrorCode;
  readonly command: readonly string[] | undefined;
  readonly stderr: string | undefined;
  constructor(code: NetErrorCode, message: string, fields: { command?: readonly string[]; stderr?: string; cause?: unknown } = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = 'NetError';
    this.code = code;
    this.command = fields.command;
    this.stderr = fields.stderr;
  }
}

/** One host: its namespace, address and interface. */
export interface Host {
  readonly name: string;
  readonly netns: string;
  /** Its IPv4 address on the switch, e.g. `10.77.0.11`. */
  readonly address: string;
}

export interface HostNetworkOptions {
  /** Host names, `[a-z0-9]{1,10}` each (they name veth ends, 15 characters at most). */
  readonly hosts: readonly string[];
  /** The last octet of each host's address, by name; hosts without one get 10, 11, … in order. */
  readonly octets?: Readonly<Record<string, number>>;
  /** Remove everything on SIGINT/SIGTERM/SIGHUP and at exit (default true). */
  readonly hookSignals?: boolean;
}

/** What a run created; JSON-serializable, so a child process can be told where it lives. */
export interface HostNetworkSpec {
  readonly runId: string;
  readonly switchNetns: string;
  readonly hosts: readonly Host[];
}

/**
 * A directory for the run's files (the NATS nodes' stores), removed with
 * the network, also on a signal and by {@link cleanupLeftovers}.
 */
export function scratchDirOf(runId: string): string {
  return join(tmpdir(), `tether-chaos-net-${runId}`);
}

export interface HostNetwork extends HostNetworkSpec {
  host(name: string): Host;
  /** `ip netns exec <netns> command args…` as a command and arguments (for spawn; the exec keeps the pid). */
  wrap(host: string, command: string, args: readonly string[]): { command: string; args: string[] };
  /** Runs a command inside a host, bounded; rejects with a {@link NetError} carrying its stderr. */
  exec(host: string, command: string, args: readonly string[], timeoutMs?: number): Promise<string>;
  /** Removes every namespace (and so link and rule) of this run; SIGKILLs any process still inside. Idempotent. */
  destroy(): Promise<DestroyReport>;
}

export interface DestroyReport {
  readonly removed: readonly string[];
  /** Processes that were still inside a namespace and were SIGKILLed (pid and command line). */
  readonly killed: readonly string[];
  /** Namespaces of this run still listed afterwards (should be none), with the error. */
  readonly failed: readonly string[];
}

/**
 * What is missing to build a host network here, each with how to get it;
 * empty when nothing is. `needNft`: the faults need nftables too.
 */
export function missingPrerequisites(needNft = true): string[] {
  const missing: string[] = [];
  if (process.getuid?.() !== 0) missing.push(`not root (uid ${process.getuid?.() ?? '?'}): network namespaces need root`);
  if (toolPath('ip') === undefined) missing.push('no `ip` (iproute2): apt-get install -y iproute2');
  if (needNft && toolPath('nft') === undefined) missing.push('no `nft`: apt-get install -y nftables');
  return missing;
}

const tools = new Map<string, string | undefined>();
/**
 * A tool's absolute path, from PATH or the sbin directories (root's tools
 * live there, and a non-login shell's PATH may lack them); undefined when
 * missing. Commands run by absolute path, so PATH does not matter later.
 */
export function toolPath(tool: string): string | undefined {
  if (!tools.has(tool)) {
    let found: string | undefined;
    for (const dir of [...(process.env['PATH'] ?? '').split(':'), '/usr/sbin', '/sbin', '/usr/bin', '/bin']) {
      if (dir === '') continue;
      try {
        if (readdirSync(dir).includes(tool)) {
          found = join(dir, tool);
          break;
        }
      } catch {
        // not a directory
      }
    }
    tools.set(tool, found);
  }
  return tools.get(tool);
}

/** `ip`'s absolute path (or plain `ip`, which then fails with ENOENT, reported). */
const IP = (): string => toolPath('ip') ?? 'ip';

/** Runs `ip`/`nft`/… and resolves with stdout; a failure names the command and carries its stderr. */
export function run(command: string, args: readonly string[], timeoutMs = EXEC_TIMEOUT_MS): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err === null) return resolve(stdout);
      const text = `${command} ${args.join(' ')}`;
      const why = stderr.trim() || err.message;
      reject(new NetError(NetErrorCode.CommandFailed, `\`${text}\` failed: ${why}`, { command: [command, ...args], stderr, cause: err }));
    });
  });
}

/**
 * Creates the switch and one namespace per host, each wired to the bridge
 * and addressed. On any failure removes what it made and throws the
 * {@link NetError} that stopped it.
 */
export async function createHostNetwork(options: HostNetworkOptions): Promise<HostNetwork> {
  const missing = missingPrerequisites(false);
  if (missing.length > 0) throw new NetError(NetErrorCode.Unavailable, `cannot build a host network: ${missing.join('; ')}`);
  const names = [...options.hosts];
  for (const name of names) if (!/^[a-z0-9]{1,10}$/.test(name)) throw new RangeError(`host name ${JSON.stringify(name)}: use 1-10 of [a-z0-9]`);
  if (new Set(names).size !== names.length) throw new RangeError(`host names repeat: ${names.join(', ')}`);
  const runId = randomBytes(3).toString('hex');
  const switchNetns = `${NETNS_PREFIX}${runId}-sw`;
  const used = new Set(Object.values(options.octets ?? {}));
  let nextOctet = 10;
  const hosts: Host[] = names.map((name) => {
    let octet = options.octets?.[name];
    if (octet === undefined) {
      while (used.has(nextOctet)) nextOctet += 1;
      octet = nextOctet;
      used.add(octet);
    }
    if (!(octet >= 2 && octet <= 254)) throw new RangeError(`host ${name}: octet ${octet} is outside 2-254`);
    return { name, netns: `${NETNS_PREFIX}${runId}-${name}`, address: `${SUBNET}.${octet}` };
  });
  const byName = new Map(hosts.map((h) => [h.name, h]));
  const all = [switchNetns, ...hosts.map((h) => h.netns)];
  writeState(runId, all);
  mkdirSync(scratchDirOf(runId), { recursive: true });

  let destroying: Promise<DestroyReport> | undefined;
  const unhook = options.hookSignals === false ? () => undefined : hookSignals(() => destroySync(runId, all));
  const destroy = (): Promise<DestroyReport> => {
    destroying ??= (async () => {
      // Hooked until the end: a signal while this runs (a second Ctrl-C, tsx relaying one) still removes everything.
      const report = await destroyAll(runId, all);
      unhook();
      return report;
    })();
    return destroying;
  };

  try {
    await run(IP(), ['netns', 'add', switchNetns]);
    await run(IP(), ['-n', switchNetns, 'link', 'add', 'br0', 'type', 'bridge']);
    await run(IP(), ['-n', switchNetns, 'link', 'set', 'br0', 'up']);
    for (const host of hosts) {
      await run(IP(), ['netns', 'add', host.netns]);
      // Made inside the switch, its other end moved straight into the host: the machine's own namespace never sees it.
      await run(IP(), ['-n', switchNetns, 'link', 'add', `v-${host.name}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', host.netns]);
      await run(IP(), ['-n', switchNetns, 'link', 'set', `v-${host.name}`, 'master', 'br0', 'up']);
      await run(IP(), ['-n', host.netns, 'addr', 'add', `${host.address}/24`, 'dev', 'eth0']);
      await run(IP(), ['-n', host.netns, 'link', 'set', 'eth0', 'up']);
      await run(IP(), ['-n', host.netns, 'link', 'set', 'lo', 'up']);
    }
  } catch (err) {
    await destroy();
    throw err;
  }

  const host = (name: string): Host => {
    const h = byName.get(name);
    if (h === undefined) throw new NetError(NetErrorCode.UnknownHost, `no host ${JSON.stringify(name)} in this network (hosts: ${names.join(', ')})`);
    return h;
  };
  return {
    runId,
    switchNetns,
    hosts,
    host,
    wrap: (name, command, args) => ({ command: IP(), args: ['netns', 'exec', host(name).netns, command, ...args] }),
    exec: (name, command, args, timeoutMs) => run(IP(), ['netns', 'exec', host(name).netns, command, ...args], timeoutMs),
    destroy,
  };
}

/**
 * A network another process created ({@link HostNetworkSpec}, e.g. from an
 * environment variable): the same `host`, `wrap` and `exec`; `destroy` is
 * the creator's, so here it does nothing.
 */
export function attachHostNetwork(spec: HostNetworkSpec): HostNetwork {
  const byName = new Map(spec.hosts.map((h) => [h.name, h]));
  const host = (name: string): Host => {
    const h = byName.get(name);
    if (h === undefined) throw new NetError(NetErrorCode.UnknownHost, `no host ${JSON.stringify(name)} in this network`);
    return h;
  };
  return {
    ...spec,
    host,
    wrap: (name, command, args) => ({ command: IP(), args: ['netns', 'exec', host(name).netns, command, ...args] }),
    exec: (name, command, args, timeoutMs) => run(IP(), ['netns', 'exec', host(name).netns, command, ...args], timeoutMs),
    destroy: async () => ({ removed: [], killed: [], failed: [] }),
  };
}

/** Children started inside hosts (nats-server, link proxies): SIGKILLed if this process exits first. One exit listener for all. */
const exitKills = new Set<{ kill(signal: NodeJS.Signals): boolean }>();
let exitHooked = false;
export function killOnExit(child: { kill(signal: NodeJS.Signals): boolean; once(event: 'exit', fn: () => void): unknown }): void {
  if (!exitHooked) {
    exitHooked = true;
    process.once('exit', () => {
      for (const c of exitKills) c.kill('SIGKILL');
    });
  }
  exitKills.add(child);
  child.once('exit', () => exitKills.delete(child));
}

/** The namespaces listed now (`ip netns list`), names only. */
export function listNetns(): string[] {
  try {
    return execFileSync(IP(), ['netns', 'list'], { encoding: 'utf8', timeout: EXEC_TIMEOUT_MS })
      .split('\n')
      .map((line) => line.split(' ')[0] ?? '')
      .filter((name) => name !== '');
  } catch {
    return [];
  }
}

async function destroyAll(runId: string, all: readonly string[]): Promise<DestroyReport> {
  const removed: string[] = [];
  const killed: string[] = [];
  const failed: string[] = [];
  const listed = new Set(listNetns());
  // Hosts first, the switch last (its veth ends go with either side).
  for (const netns of [...all].reverse()) {
    if (!listed.has(netns)) continue;
    killed.push(...killInside(netns));
    try {
      await run(IP(), ['netns', 'del', netns]);
      removed.push(netns);
    } catch (err) {
      failed.push(`${netns}: ${(err as Error).message}`);
    }
  }
  const left = new Set(listNetns());
  for (const netns of all) if (left.has(netns) && !failed.some((f) => f.startsWith(`${netns}:`))) failed.push(`${netns}: still listed`);
  if (failed.length === 0) rmSync(join(STATE_DIR, `${runId}.json`), { force: true });
  rmSync(scratchDirOf(runId), { recursive: true, force: true, maxRetries: 3 });
  return { removed, killed, failed };
}

/** The same, synchronously, for a signal or exit handler. */
function destroySync(runId: string, all: readonly string[]): void {
  const listed = new Set(listNetns());
  for (const netns of [...all].reverse()) {
    if (!listed.has(netns)) continue;
    killInside(netns);
    try {
      execFileSync(IP(), ['netns', 'del', netns], { timeout: EXEC_TIMEOUT_MS, stdio: 'ignore' });
    } catch {
      // `cleanupLeftovers` finds it later.
    }
  }
  try {
    rmSync(join(STATE_DIR, `${runId}.json`), { force: true });
    rmSync(scratchDirOf(runId), { recursive: true, force: true, maxRetries: 3 });
  } catch {
    // nothing to do
  }
}

/** SIGKILLs what runs inside one of our namespaces (only ours: callers pass this run's, or a dead run's). */
function killInside(netns: string): string[] {
  const out: string[] = [];
  let pids: number[] = [];
  try {
    pids = execFileSync(IP(), ['netns', 'pids', netns], { encoding: 'utf8', timeout: EXEC_TIMEOUT_MS }).split('\n').filter((p) => /^\d+$/.test(p)).map(Number);
  } catch {
    return out;
  }
  for (const pid of pids) {
    if (pid === process.pid) continue;
    let cmd = '?';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 120);
      process.kill(pid, 'SIGKILL');
      out.push(`${pid} ${cmd}`);
    } catch {
      // gone already
    }
  }
  return out;
}

function writeState(runId: string, namespaces: readonly string[]): void {
  mkdirSync(STATE_DIR, { recursive: true });
  writeFileSync(join(STATE_DIR, `${runId}.json`), `${JSON.stringify({ pid: process.pid, started: startTimeOf(process.pid), namespaces })}\n`);
}

/** A process's start time (field 22 of /proc/<pid>/stat), so a reused pid is not taken for the owner. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

export interface CleanupReport {
  /** Runs whose owner is still alive: left alone. */
  readonly live: readonly string[];
  readonly removed: readonly string[];
  readonly killed: readonly string[];
  readonly failed: readonly string[];
}

/**
 * Removes what earlier runs left behind: every `tchaos-<run>-…` namespace
 * whose run's owner process is gone (or that has no state file), with any
 * process still inside it (processes a dead run started). Live runs are
 * left alone.
 */
export async function cleanupLeftovers(): Promise<CleanupReport> {
  const byRun = new Map<string, string[]>();
  for (const netns of listNetns()) {
    const m = /^tchaos-([0-9a-f]{6})-[a-z0-9]+$/.exec(netns);
    if (m === null) continue;
    const list = byRun.get(m[1]!) ?? [];
    if (list.length === 0) byRun.set(m[1]!, list);
    list.push(netns);
  }
  const live: string[] = [];
  const removed: string[] = [];
  const killed: string[] = [];
  const failed: string[] = [];
  for (const [runId, namespaces] of byRun) {
    let owner: { pid: number; started?: string } | undefined;
    try {
      owner = JSON.parse(readFileSync(join(STATE_DIR, `${runId}.json`), 'utf8')) as { pid: number; started?: string };
    } catch {
      owner = undefined;
    }
    if (owner !== undefined && startTimeOf(owner.pid) !== undefined && startTimeOf(owner.pid) === owner.started) {
      live.push(`${runId} (owner pid ${owner.pid})`);
      continue;
    }
    // The switch last.
    const ordered = namespaces.sort((a, b) => Number(a.endsWith('-sw')) - Number(b.endsWith('-sw')));
    const report = await destroyAll(runId, ordered);
    removed.push(...report.removed);
    killed.push(...report.killed);
    failed.push(...report.failed);
  }
  return { live, removed, killed, failed };
}

/** Destroys on SIGINT/SIGTERM/SIGHUP (then re-raises, as children.ts does) and at exit. Returns the unhook. */
function hookSignals(destroyNow: () => void): () => void {
  let done = false;
  const once = (): void => {
    if (done) return;
    done = true;
    destroyNow();
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    once();
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const s of signals) process.once(s, onSignal);
  process.once('exit', once);
  return () => {
    done = true;
    for (const s of signals) process.off(s, onSignal);
    process.off('exit', once);
  };
}
