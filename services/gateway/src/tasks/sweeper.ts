/**
 * The task sweeper: settles `working` tasks whose runner (a gateway
 * process) died, whether or not anyone polls them (docs/design.md, "When
 * each process dies"). Without it, such a task waits for its next reader,
 * or stays `working` until its TTL.
 *
 * Cost: the working tasks come from an index of task writes (headers only;
 * `TaskPort.openWorking`), never from reading records; each tick probes
 * each distinct remote runner once (O(instances), not O(tasks)) and reads a
 * record only when its runner is gone. Every instance sweeps: the settle is
 * a compare-and-set on the runner, so one of them writes, once.
 */
import type { Logger } from 'pino';
import type { TaskPort, WorkingTaskRef, WorkingTasks } from '../log/log-port.js';
import type { EdgeTasks } from './edge-tasks.js';
import { tag } from './edge-tasks.js';

export interface TaskSweeperOptions {
  readonly tasks: EdgeTasks;
  readonly table: TaskPort;
  /** Time between sweeps (`--task-sweep-interval`, default 2000 ms); the first comes after a random part of it, so instances do not sweep in step. */
  readonly intervalMs: number;
  readonly logger: Logger;
}

/** What the sweeps did so far, for tests and `/metrics`-style reading. */
export interface SweepStats {
  readonly sweeps: number;
  /** Working tasks listed, summed over sweeps. */
  readonly listed: number;
  /** Distinct remote runners probed, summed over sweeps. */
  readonly probes: number;
  /** Records read (only tasks whose runner was found gone). */
  readonly reads: number;
  /** Tasks this instance settled `failed`. */
  readonly settled: number;
  /** Tasks left to their reader (a rerun is possible and needs the caller's credentials). */
  readonly left: number;
  readonly failures: number;
}

export class TaskSweeper {
  readonly #options: TaskSweeperOptions;
  readonly #working: WorkingTasks;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #running: Promise<void> | undefined;
  #stats = { sweeps: 0, listed: 0, probes: 0, reads: 0, settled: 0, left: 0, failures: 0 };

  private constructor(options: TaskSweeperOptions, working: WorkingTasks) {
    this.#options = options;
    this.#working = working;
  }

  /** Opens the working-task index and schedules the sweeps. */
  static async start(options: TaskSweeperOptions): Promise<TaskSweeper> {
    const sweeper = new TaskSweeper(options, await options.table.openWorking());
    sweeper.#schedule(Math.random() * options.intervalMs);
    return sweeper;
  }

  get stats(): SweepStats {
    return { ...this.#stats };
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.sweepOnce()
        .catch((err: unknown) => {
          this.#stats.failures += 1;
          this.#options.logger.warn({ err: String(err) }, 'task sweep failed; trying again next interval');
        })
        .finally(() => {
          this.#running = undefined;
          this.#schedule(this.#options.intervalMs);
        });
    }, delayMs);
    this.#timer.unref();
  }

  /** One sweep: list, probe each remote runner once, settle the tasks of those gone. */
  async sweepOnce(): Promise<void> {
    const { tasks } = this.#options;
    const working = await this.#working.list();
    this.#stats.sweeps += 1;
    this.#stats.listed += working.length;
    const byRunner = new Map<string, WorkingTaskRef[]>();
    for (const task of working) {
      // Ours: a call that runs here settles itself, and one that does not is a reader's (a sweep could race the call's start).
      if (task.runner === tasks.writerId) continue;
      const group = byRunner.get(task.runner);
      if (group === undefined) byRunner.set(task.runner, [task]);
      else group.push(task);
    }
    for (const [runner, group] of byRunner) {
      if (this.#stopped) return;
      this.#stats.probes += 1;
      if ((await tasks.runnerState(runner)) !== 'gone') continue;
      for (const { taskId } of group) {
        if (this.#stopped) return;
        this.#stats.reads += 1;
        const stored = await this.#options.table.read(taskId);
        if (stored === undefined) continue;
        const outcome = await tasks.sweep(stored);
        if (outcome === 'settled') this.#stats.settled += 1;
        else if (outcome === 'left') this.#stats.left += 1;
        if (outcome !== 'unchanged') this.#options.logger.debug({ task: tag(taskId), outcome }, 'task swept');
      }
    }
  }

  /** Stops sweeping (a sweep under way finishes its current task). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running?.catch(() => undefined);
    await this.#working.close().catch(() => undefined);
  }
}
