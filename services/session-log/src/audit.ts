import type { Metadata } from '@grpc/grpc-js';
import type { RecordAuditBatchResponse, RecordAuditRequest, RefusedAuditEvent } from '@tether/cursor-proto';
import { isStreamId, ResumeVerdict } from '@tether/protocol';
import { AuditKind, isWriterId, SessionLogErrorCode } from '@tether/session-log';
import type { AuditEvent, AuditRecord, SessionLog } from '@tether/session-log';
import { countOf, sessionIdOf, textOf } from './convert.js';
import { CursorServiceError, invalid } from './errors.js';
import type { CallerScope } from './scope.js';

/** The service's own instance name in audit events when `--instance-id` is not given. */
export const DEFAULT_INSTANCE_ID = 'tether-session-log';

/**
 * Call metadata by which a caller says it records its own audit events (a
 * gateway's gRPC log sends it on every call): the service then records none
 * of its own for that call, so a session is not drawn twice, once from the
 * gateway's view and once from the service's.
 */
export const AUDIT_BY_CALLER_HEADER = 'tether-audit';
export const AUDIT_BY_CALLER_VALUE = 'self';

/** How far ahead of the service's clock a caller's `at_ms` may be (clock skew between hosts). */
const MAX_FUTURE_MS = 5 * 60_000;
const MAX_INSTANCE_BYTES = 128;
const MAX_REASON_BYTES = 64;
const CONN = /^[A-Za-z0-9_-]{1,32}$/;
const KINDS: ReadonlySet<string> = new Set(Object.values(AuditKind));
const VERDICTS: ReadonlySet<string> = new Set(Object.values(ResumeVerdict));

/**
 * A RecordAudit request as the audit event to store, every field checked:
 * known kind and verdict, ids in their own shapes, bounded text without
 * control characters, numbers in range. Bad input is `invalid_argument`
 * naming the field. Nothing is stamped but `v` and, for `at_ms` 0, the
 * time of receipt: the instance and everything else are the caller's.
 */
export function auditEventOf(req: RecordAuditRequest, nowMs: number): AuditEvent {
  const atMs = req.atMs === 0 ? nowMs : countOf('at_ms', req.atMs, 1, nowMs + MAX_FUTURE_MS);
  if (req.instance === '') throw invalid('instance must not be empty');
  const instance = textOf('instance', req.instance, MAX_INSTANCE_BYTES);
  if (!KINDS.has(req.kind)) throw invalid(`kind must be one of ${[...KINDS].join(', ')}, got ${JSON.stringify(req.kind.slice(0, 32))}`);
  const record: { -readonly [K in keyof AuditRecord]: AuditRecord[K] } = { kind: req.kind };
  if (req.stream !== undefined) record.stream = streamOf('stream', req.stream);
  if (req.cursor !== undefined) {
    record.cursor = {
      stream: streamOf('cursor.stream', req.cursor.stream),
      seq: countOf('cursor.seq', req.cursor.seq, 0, Number.MAX_SAFE_INTEGER),
      pos: countOf('cursor.pos', req.cursor.pos, 0, Number.MAX_SAFE_INTEGER),
    };
  }
  if (req.verdict !== undefined) {
    if (!VERDICTS.has(req.verdict)) throw invalid(`verdict must be one of ${[...VERDICTS].join(', ')}, got ${JSON.stringify(req.verdict.slice(0, 32))}`);
    record.verdict = req.verdict;
  }
  if (req.status !== undefined) record.status = countOf('status', req.status, 100, 599);
  if (req.events !== undefined) record.events = countOf('events', req.events, 0, Number.MAX_SAFE_INTEGER);
  if (req.conn !== undefined) {
    if (!CONN.test(req.conn)) throw invalid('conn must be 1 to 32 characters of A-Z, a-z, 0-9, _ and -');
    record.conn = req.conn;
  }
  if (req.writer !== undefined) record.writer = writerOf('writer', req.writer);
  if (req.from !== undefined) record.from = writerOf('from', req.from);
  if (req.reason !== undefined) record.reason = textOf('reason', req.reason, MAX_REASON_BYTES);
  return { v: 1, atMs, instance, ...record };
}

/**
 * RecordAuditBatch's body (the batch's size checked before): each entry is
 * checked as RecordAudit checks it, on its own, and refused on its own. A
 * gateway's batch mixes events of many users' sessions, so one bad or
 * foreign entry must not cost the others theirs. Ownership is asked once
 * per distinct session, every answer before the first publish: a registry
 * that cannot answer fails the call with nothing recorded, never half.
 * A foreign session and an unknown one are refused alike (`session_not_found`).
 */
export async function recordAuditBatch(log: SessionLog, scope: CallerScope, caller: string, entries: readonly RecordAuditRequest[], nowMs: number): Promise<RecordAuditBatchResponse> {
  const refused: RefusedAuditEvent[] = [];
  const checked: { readonly index: number; readonly sessionId: string; readonly event: AuditEvent }[] = [];
  for (const [index, entry] of entries.entries()) {
    try {
      checked.push({ index, sessionId: sessionIdOf(entry.sessionId), event: auditEventOf(entry, nowMs) });
    } catch (err) {
      if (!(err instanceof CursorServiceError)) throw err;
      refused.push({ index, code: err.code, message: err.message });
    }
  }
  const owned = new Set<string>();
  await Promise.all(
    [...new Set(checked.map((c) => c.sessionId))].map(async (sessionId) => {
      if (await scope.owns(sessionId, caller)) owned.add(sessionId);
    }),
  );
  let recorded = 0;
  for (const { index, sessionId, event } of checked) {
    if (!owned.has(sessionId)) {
      refused.push({ index, code: SessionLogErrorCode.sessionNotFound, message: 'session not found' });
      continue;
    }
    // Fire and forget, like RecordAudit: a core publish the log stream captures.
    log.recordAudit(sessionId, event);
    recorded += 1;
  }
  refused.sort((a, b) => a.index - b.index);
  return { recorded, refused };
}

function streamOf(name: string, stream: string): string {
  if (!isStreamId(stream)) throw invalid(`${name} must be '0' or 8 lowercase base32 characters`);
  return stream;
}

function writerOf(name: string, writer: string): string {
  if (!isWriterId(writer)) throw invalid(`${name} must be a writer id: 8 to 64 characters of A-Z, a-z, 0-9, _ and -`);
  return writer;
}

/** True when the call's caller records its own audit events (see {@link AUDIT_BY_CALLER_HEADER}). */
export function auditedByCaller(metadata: Metadata): boolean {
  return metadata.get(AUDIT_BY_CALLER_HEADER).some((v) => v.toString() === AUDIT_BY_CALLER_VALUE);
}

/**
 * The service's own audit events, for the session RPCs it serves to
 * custom servers (OpenSession, CloseSession, Resume). Fire and forget like
 * a gateway's: a core publish, and a failure never fails the call.
 */
export interface ServiceAudit {
  record(sessionId: string, record: AuditRecord): void;
}

export function createServiceAudit(log: SessionLog, instance: string, enabled = true): ServiceAudit {
  if (!enabled) return { record: () => undefined };
  return {
    record(sessionId, record) {
      try {
        log.recordAudit(sessionId, { v: 1, atMs: Date.now(), instance, ...record });
      } catch {
        // A closed connection throws on publish: an audit event is never worth a failed call.
      }
    },
  };
}
