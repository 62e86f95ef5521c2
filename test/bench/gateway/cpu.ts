/**
 * CPU time of the processes in a run, from /proc: where the machine's two
 * cores went while a figure was measured (evidence, not guesses).
 */
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';

/** Clock ticks per second of /proc/<pid>/stat times. */
const TICKS_PER_S = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** user + system CPU time of a process so far, in ms (this process: `process.cpuUsage()`). */
export async function cpuMs(pid: number): Promise<number> {
  if (pid === process.pid) {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3: utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_S;
}

/** The processes of a run, by role. */
export type Processes = Readonly<Record<string, number>>;

/** Machine-wide CPU time so far (all CPUs, /proc/stat), in ms. */
export async function machineCpuMs(): Promise<{ busy: number; steal: number }> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n', 1)[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  const ticks = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0);
  return { busy: (ticks * 1000) / TICKS_PER_S, steal: ((steal ?? 0) * 1000) / TICKS_PER_S };
}

export interface CpuRun<T> {
  readonly value: T;
  readonly wallMs: number;
  /** CPU ms per named process. */
  readonly cpuMs: Record<string, number>;
  /**
   * CPU ms the machine spent on anything else: other processes (other
   * people's tests on a shared machine), and kernel work not charged to a
   * process (loopback softirq).
   */
  readonly otherMs: number;
  /** CPU ms stolen by the hypervisor. */
  readonly stealMs: number;
}

/** CPU ms each process (and the rest of the machine) used while `work` ran, and the wall time. */
export async function withCpu<T>(processes: Processes, work: () => Promise<T>): Promise<CpuRun<T>> {
  const names = Object.keys(processes);
  const machineBefore = await machineCpuMs();
  const before = await Promise.all(names.map((n) => cpuMs(processes[n]!)));
  const start = performance.now();
  const value = await work();
  const wallMs = performance.now() - start;
  const after = await Promise.all(names.map((n) => cpuMs(processes[n]!)));
  const machineAfter = await machineCpuMs();
  const cpu = Object.fromEntries(names.map((n, i) => [n, after[i]! - before[i]!]));
  const ours = Object.values(cpu).reduce((a, b) => a + b, 0);
  return { value, wallMs, cpuMs: cpu, otherMs: Math.max(0, machineAfter.busy - machineBefore.busy - ours), stealMs: machineAfter.steal - machineBefore.steal };
}

/**
 * Waits (at most `maxWaitMs`) until the rest of the machine uses less than
 * `maxBusyCores` cores over two 3 s windows in a row; returns what it saw last. Other
 * people's test runs on a shared machine skew every figure here.
 */
export async function waitForQuietMachine(maxBusyCores: number, maxWaitMs: number, onWait: (busyCores: number) => void): Promise<number> {
  const deadline = performance.now() + maxWaitMs;
  let quietWindows = 0;
  for (;;) {
    const before = await machineCpuMs();
    const start = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const busyCores = ((await machineCpuMs()).busy - before.busy) / (performance.now() - start);
    quietWindows = busyCores <= maxBusyCores ? quietWindows + 1 : 0;
    // Two quiet windows in a row: a test suite between two files is not quiet.
    if (quietWindows >= 2 || performance.now() > deadline) return busyCores;
    if (quietWindows === 0) onWait(busyCores);
  }
}

/** Server-wide message and JetStream API counters, from nats-server's monitoring port. */
export interface NatsCounters {
  /** Messages received from clients (publishes, requests, acks). */
  readonly inMsgs: number;
  /** Messages sent to clients (deliveries, replies). */
  readonly outMsgs: number;
  /** JetStream API requests served (stream/consumer/KV management, direct gets, fetch...). */
  readonly apiTotal: number;
}

export async function natsCounters(monitorPort: number): Promise<NatsCounters> {
  const get = async (path: string): Promise<Record<string, unknown>> => (await (await fetch(`http://127.0.0.1:${monitorPort}${path}`)).json()) as Record<string, unknown>;
  const [varz, jsz] = await Promise.all([get('/varz'), get('/jsz')]);
  return { inMsgs: Number(varz['in_msgs']), outMsgs: Number(varz['out_msgs']), apiTotal: Number((jsz['api'] as { total?: unknown } | undefined)?.total) };
}
