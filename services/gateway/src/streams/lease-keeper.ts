import type { Lease } from '@tether/session-log';
import type { LogPort } from '../log/log-port.js';

/**
 * Keeps a writer lease alive by renewing it at a third of its lifetime.
 * `onLost` runs once if a renewal fails: the caller must stop writing (the
 * log's tripwire and chain checks would catch it anyway; this stops it early).
 */
export function keepLease(log: LogPort, lease: Lease, ttlMs: number, onLost: (err: unknown) => void): { release(): Promise<void> } {
  let current = lease;
  let stopped = false;
  const timer = setInterval(() => {
    log.renewLease(current, ttlMs).then(
      (renewed) => {
        current = renewed;
      },
      (err: unknown) => {
        if (stopped) return;
        stopped = true;
        clearInterval(timer);
        onLost(err);
      },
    );
  }, Math.max(100, Math.floor(ttlMs / 3)));
  timer.unref();
  return {
    async release() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await log.releaseLease(current).catch(() => undefined);
    },
  };
}
