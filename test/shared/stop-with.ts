/**
 * How a harness child process (an upstream started by a test or the chaos
 * run) ends: on SIGTERM or SIGINT it closes what it serves, then exits 0.
 * Whoever started it SIGKILLs it when it exits; if that parent was SIGKILLed
 * itself, the child notices being re-parented and stops on its own.
 */
export function stopWith(close: () => Promise<unknown>): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop();
  }, 2_000).unref();
}
