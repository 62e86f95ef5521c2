/**
 * `--task-upstream owned`: the test kit's upstream that runs the Tasks
 * extension itself (`startOwnedTasksUpstream`, each replica's tasks in its
 * own memory, as rmcp and FastMCP keep them), two replicas in the
 * harness's process behind one route (`--route /tasks/mcp=<r1>,<r2>`). The
 * gateways route every task to the replica that created it.
 *
 * The `task_replica_kill` fault stops one replica (its listener closed, its
 * open sockets destroyed, its tasks aborted: to its callers a process gone)
 * and starts a new, empty one on the same port after a while. Every task
 * the stopped replica held is lost with it; the gateways must say so
 * (`failed`, `replica_gone` while nothing listens, `replica_forgot` once
 * the empty one answers "not found"), which the task checker accepts only
 * for the tasks recorded here.
 */
import { startOwnedTasksUpstream } from '@tether/testing';
import type { OwnedTasksUpstream } from '@tether/testing';
import { sleep } from './util.js';

const REPLICAS = 2;
/** Restart tries on the same port (a closed port can take a moment to be free again). */
const RESTART_TRIES = 4;

export class OwnedReplicas {
  readonly #replicas: OwnedTasksUpstream[];
  /** Every task a killed replica held when it was stopped, and when (ms since epoch). */
  readonly #lost = new Map<string, number>();
  #kills = 0;

  private constructor(replicas: OwnedTasksUpstream[]) {
    this.#replicas = replicas;
  }

  static async start(): Promise<OwnedReplicas> {
    const replicas: OwnedTasksUpstream[] = [];
    for (let i = 0; i < REPLICAS; i += 1) replicas.push(await startOwnedTasksUpstream({ name: `r${i + 1}` }));
    return new OwnedReplicas(replicas);
  }

  /** The route's upstreams, comma separated: one deployment of two replicas. */
  get routeTarget(): string {
    return this.#replicas.map((r) => r.url).join(',');
  }

  /** Task id → when the replica holding it was killed. */
  get lostTasks(): ReadonlyMap<string, number> {
    return this.#lost;
  }

  get kills(): number {
    return this.#kills;
  }

  /**
   * Stops replica `target % 2`, keeps it down `downMs`, and starts an empty
   * one on its port. Returns what the fault log says.
   */
  async kill(target: number, downMs: number): Promise<{ target: string; detail: string }> {
    const i = target % this.#replicas.length;
    const victim = this.#replicas[i]!;
    const port = Number(new URL(victim.url).port);
    // Read before the close: a task created up to this instant is lost with the replica.
    const held = victim.taskIds();
    const at = Date.now();
    for (const taskId of held) this.#lost.set(taskId, at);
    this.#kills += 1;
    await victim.close();
    await sleep(downMs);
    for (let attempt = 1; ; attempt += 1) {
      try {
        this.#replicas[i] = await startOwnedTasksUpstream({ name: victim.name, port });
        break;
      } catch (err) {
        if (attempt >= RESTART_TRIES) throw err;
        await sleep(250);
      }
    }
    return { target: victim.name, detail: `down ${downMs}ms, ${held.length} tasks held lost with it, restarted empty on :${port}` };
  }

  async close(): Promise<void> {
    await Promise.all(this.#replicas.map((r) => r.close().catch(() => undefined)));
  }
}
