import { randomBytes } from 'node:crypto';
import type { AuditRecord } from '@tether/session-log';
import type { LogPort } from './log/log-port.js';

/**
 * The gateway's audit events (metadata only; `@tether/session-log` audit.ts):
 * one call per request kind in the handlers, `ctx.audit.record(...)`. A
 * record is a fire-and-forget publish (in-process: a core publish the log
 * stream captures, no ack awaited); nothing in the request path waits for
 * it, and a failure to record never fails a request. `--audit off` makes
 * every call a no-op, so the gateway benchmark can compare.
 */
export interface Audit {
  readonly enabled: boolean;
  record(sessionId: string, record: AuditRecord): void;
  /**
   * Records a delivery's request (its kind, stream, cursor, verdict,
   * status) and returns the random id that joins it to the `delivered`
   * event its end records.
   */
  open(sessionId: string, record: AuditRecord): string;
}

export function createAudit(log: LogPort, instance: string, enabled: boolean): Audit {
  if (!enabled) return { enabled, record: () => undefined, open: () => '' };
  const record = (sessionId: string, event: AuditRecord): void => {
    try {
      log.audit(sessionId, { v: 1, atMs: Date.now(), instance, ...event });
    } catch {
      // A closed connection throws on publish: an audit event is never worth a failed request.
    }
  };
  return {
    enabled,
    record,
    open(sessionId, event) {
      const conn = randomBytes(6).toString('base64url');
      record(sessionId, { ...event, conn });
      return conn;
    },
  };
}
