import type { Socket } from 'node:net';

/**
 * The `tasks/stream` requests active on each transport connection, by task
 * id: SEP-2694 (draft) allows "at most one active `tasks/stream` request per
 * task per connection" and answers a second -32602.
 *
 * A 2026-07-28 client has no session, so the connection is the one the
 * request arrived on. HTTP/1.1 carries one response at a time, but a
 * client may pipeline: Node parses the next request on the socket (and runs
 * its handler) while the first stream is still being written, and queues
 * the second answer behind it. Keyed weakly by the socket, so a closed
 * connection leaves nothing behind.
 */
export class StreamsPerConnection {
  readonly #active = new WeakMap<Socket, Set<string>>();

  /** Claims `taskId` on `socket`: a release function, or undefined when a stream of that task is already active there. */
  claim(socket: Socket, taskId: string): (() => void) | undefined {
    let tasks = this.#active.get(socket);
    if (tasks === undefined) {
      tasks = new Set();
      this.#active.set(socket, tasks);
    }
    if (tasks.has(taskId)) return undefined;
    tasks.add(taskId);
    const held = tasks;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      held.delete(taskId);
    };
  }
}
