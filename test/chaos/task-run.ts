/**
 * The task part of a chaos run: the test kit's task upstream (in the
 * harness's process; no fault restarts it), the task clients, and the
 * runner kills. The gateways serve the upstream on its own route
 * (`--route /tasks/mcp=…`, with `--task-retry idempotent`), so the
 * session-era clients and their routes are unchanged.
 *
 * Runner kills: every `gateway_sigkill` of the schedule first creates a
 * victim task through the balancer (alternately a `hold`, which never
 * answers by itself, and a 3 s `idempotent_job`), reads from the task store
 * which gateway runs it, and SIGKILLs that one. The hold must then be
 * settled `failed` with `runner_lost` by the next reader, the job rerun and
 * completed. A victim whose runner could not be found is not killed (the
 * fault takes its planned gateway) and a hold is released, so it completes.
 *
 * `--task-upstream owned` puts two replicas of the kit's extension-running
 * upstream there instead (`owned-replicas.ts`): the gateways run nothing,
 * they route each task to its replica, so a `gateway_sigkill` takes its
 * planned gateway (no runner to aim at) and must cost no task, and
 * `task_replica_kill` loses a replica's tasks, which must end `failed` with
 * a named replica reason. The gateways' route records hold no outcome
 * (the replica does), so no record is compared after the run.
 */
import { randomBytes } from 'node:crypto';
import { startTaskUpstream } from '@tether/testing';
import type { TaskUpstream } from '@tether/testing';
import { checkTasks } from './task-checker.js';
import type { TaskCall, TaskReport } from './task-checker.js';
import { OwnedReplicas } from './owned-replicas.js';
import { follow, newCall, startCall, TaskClient } from './task-client.js';
import type { TaskContext, TaskUpstreamKind } from './task-client.js';
import { openTaskRecords } from './task-records.js';
import { sleep } from './util.js';
import type { TaskRecords } from './task-records.js';
import type { ChaosStack } from './stack.js';
import type { Rng } from '../shared/random.js';

/** Tries to make a victim a task before the kill goes to its planned gateway, and the pause between them. */
const VICTIM_ATTEMPTS = 5;
const VICTIM_RETRY_MS = 500;
/** How long an idempotent victim runs: long enough to be killed mid-call after its runner is read. */
const VICTIM_JOB_MS = 3_000;
/** What a runner kill may spend before the fault goes ahead without it. */
const VICTIM_CALL_TIMEOUT_MS = 3_000;
const VICTIM_RECORD_BUDGET_MS = 2_000;
/** Reading every created task's record at the end. */
const RECORDS_BUDGET_MS = 30_000;

export interface TaskPartOptions {
  /** Task clients. */
  readonly clients: number;
  /** Calls per client at most. Default 10,000 (the run's duration bounds them first). */
  readonly maxCallsPerClient?: number;
  /** The upstream behind `/tasks/mcp`. Default `kit` (the gateways own the tasks). */
  readonly upstream?: TaskUpstreamKind;
}

export class TaskPart {
  readonly #options: TaskPartOptions;
  /** `kit`: the task upstream whose tasks the gateways run; `owned`: the replicas that run their own. */
  readonly #upstream: TaskUpstream | undefined;
  readonly #replicas: OwnedReplicas | undefined;
  readonly #calls: TaskCall[] = [];
  readonly #running: Promise<void>[] = [];
  #stack: ChaosStack | undefined;
  #records: TaskRecords | undefined;
  #ctx: TaskContext | undefined;
  #victims = 0;
  /** Each gateway instance (`gw2.1`) and when the harness last saw its process running. */
  readonly #lastAlive = new Map<string, number>();
  #watch: NodeJS.Timeout | undefined;

  private constructor(options: TaskPartOptions, upstream: TaskUpstream | OwnedReplicas) {
    this.#options = options;
    this.#upstream = upstream instanceof OwnedReplicas ? undefined : upstream;
    this.#replicas = upstream instanceof OwnedReplicas ? upstream : undefined;
  }

  /** Starts the task upstream (before the gateways, whose tool catalog reads it). */
  static async start(options: TaskPartOptions): Promise<TaskPart> {
    return new TaskPart(options, options.upstream === 'owned' ? await OwnedReplicas.start() : await startTaskUpstream());
  }

  get upstreamKind(): TaskUpstreamKind {
    return this.#replicas === undefined ? 'kit' : 'owned';
  }

  /** Every call of the task clients and the runner kills, as recorded (for `--dump`). */
  get calls(): readonly TaskCall[] {
    return this.#calls;
  }

  /** What the gateways' `--route /tasks/mcp=` names: the task upstream, or both replicas comma separated. */
  get upstreamUrl(): string {
    return this.#replicas?.routeTarget ?? this.#upstream!.url;
  }

  /** For `task_replica_kill` (`--task-upstream owned`); undefined otherwise. */
  get replicaKill(): ((target: number, downMs: number) => Promise<{ target: string; detail: string }>) | undefined {
    const replicas = this.#replicas;
    return replicas === undefined ? undefined : (target, downMs) => replicas.kill(target, downMs);
  }

  /** Starts the clients against the stack's balancer; none starts a call after `stopAt`. */
  async begin(stack: ChaosStack, namespace: string, stopAt: number, rng: Rng): Promise<void> {
    this.#stack = stack;
    this.#records = await openTaskRecords(stack.cluster.urls, namespace);
    const ctx: TaskContext = { upstream: this.upstreamKind, baseUrl: stack.baseUrl, stopAt, maxCalls: this.#options.maxCallsPerClient ?? 10_000, calls: this.#calls };
    this.#ctx = ctx;
    const look = (): void => {
      for (const g of stack.gateways) if (g.process !== undefined) this.#lastAlive.set(`${g.name}.${g.generation - 1}`, Date.now());
    };
    look();
    this.#watch = setInterval(look, 100);
    for (let i = 0; i < this.#options.clients; i += 1) this.#running.push(new TaskClient(ctx, `task${i + 1}`, rng.fork(3_000_000 + i)).run());
  }

  /** The load goes on longer (the run waits for its first-pass faults): no call starts after `stopAt`, now later. */
  extend(stopAt: number): void {
    if (this.#ctx !== undefined) this.#ctx.stopAt = Math.max(this.#ctx.stopAt, stopAt);
  }

  /**
   * For `gateway_sigkill`: a victim task, and the slot of the gateway that
   * runs it; undefined when there is none to aim at (the fault then takes
   * its planned gateway).
   */
  readonly runnerToKill = async (): Promise<{ slot: number; detail: string } | undefined> => {
    const stack = this.#stack;
    const records = this.#records;
    const ctx = this.#ctx;
    // Upstream-owned tasks run on the replicas: no gateway is any task's runner.
    if (this.#replicas !== undefined) return undefined;
    if (stack === undefined || records === undefined || ctx === undefined || Date.now() >= ctx.stopAt) return undefined;
    this.#victims += 1;
    const n = this.#victims;
    const hold = n % 2 === 1;
    // A victim refused before it is a task (a 503 while a NATS node's leader
    // election runs) is asked again, so a kill still finds a runner to aim at.
    let key = '';
    let call: TaskCall | undefined;
    for (let attempt = 0; attempt < VICTIM_ATTEMPTS && Date.now() < ctx.stopAt; attempt += 1) {
      if (attempt > 0) await sleep(VICTIM_RETRY_MS);
      key = `victim-${n}-${randomBytes(4).toString('hex')}`;
      call = hold
        ? newCall('runner-kill', n, 'hold', { exact: `released ${key}`, asks: false, idempotent: false }, true)
        : newCall('runner-kill', n, 'idempotent_job', { pattern: /^done \d+$/, asks: false, idempotent: true }, true);
      this.#calls.push(call);
      await startCall(ctx.baseUrl, call, hold ? { key } : { ms: VICTIM_JOB_MS }, VICTIM_CALL_TIMEOUT_MS);
      if (call.call === 'task') break;
    }
    if (call === undefined || call.call !== 'task') return undefined;
    const record = await records.readWithin(call.taskId!, VICTIM_RECORD_BUDGET_MS);
    const instance = typeof record === 'object' ? record.runnerInstance : undefined;
    const slot = instance === undefined ? undefined : stack.gateways.find((g) => g.process !== undefined && `${g.name}.${g.generation - 1}` === instance);
    if (slot === undefined || instance === undefined) {
      if (hold) this.#upstream?.release(key, `released ${key}`);
    } else {
      call.killed = instance;
    }
    const settleBy = Date.now() + (hold ? 0 : VICTIM_JOB_MS);
    this.#running.push(follow(ctx.baseUrl, call, { settleBy: () => settleBy }));
    return slot === undefined ? undefined : { slot: slot.slot, detail: `aimed at the runner of task ${call.taskId!.slice(0, 6)}… (${call.tool}) on ${instance}` };
  };

  /** Waits for every client and victim to end, reads each task's record, and judges them. */
  async finish(say: (line: string) => void): Promise<TaskReport> {
    // A victim may still be added while the first ones are awaited (the fault schedule ends first, but to be sure).
    for (let seen = 0; seen < this.#running.length; ) {
      const batch = this.#running.slice(seen);
      seen += batch.length;
      await Promise.all(batch);
    }
    const records = this.#records;
    const withTask = this.#calls.filter((c) => c.taskId !== undefined);
    let inStore: number | undefined;
    // A route record holds no outcome (the replica does): nothing to compare for upstream-owned tasks.
    if (records !== undefined && this.#replicas === undefined) {
      const until = Date.now() + RECORDS_BUDGET_MS;
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < withTask.length) {
          const call = withTask[next++]!;
          const left = until - Date.now();
          const record = left <= 0 ? 'unreadable' : await records.readWithin(call.taskId!, Math.min(left, 5_000));
          call.record = record ?? 'absent';
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
    }
    inStore = await records?.count();
    clearInterval(this.#watch);
    // A runner_lost settled while its runner still ran: seen alive a second after the settle.
    for (const call of withTask) {
      const instance = typeof call.record === 'object' ? call.record.runnerInstance : undefined;
      const at = call.terminal?.updatedAt;
      if (instance === undefined || at === undefined || call.terminal?.status !== 'failed') continue;
      call.runnerAlive = (this.#lastAlive.get(instance) ?? 0) >= at + 1_000;
    }
    say(`tasks: ${this.#calls.length} calls, ${withTask.length} tasks followed to their end, ${this.#replicas === undefined ? 'records read' : 'route records not compared (the replicas hold the outcomes)'}`);
    return checkTasks(this.#calls, this.#options.clients, inStore, this.#replicas?.lostTasks);
  }

  async close(): Promise<void> {
    clearInterval(this.#watch);
    await this.#records?.close();
    await this.#upstream?.close();
    await this.#replicas?.close();
  }
}
