import type {
  CloseSessionRequest,
  CloseSessionResponse,
  GetSessionRequest,
  GetSessionResponse,
  OpenSessionRequest,
  OpenSessionResponse,
  TouchSessionRequest,
  TouchSessionResponse,
} from '@tether/cursor-proto';
import { isSessionLogError, principalDigest } from '@tether/session-log';
import type { TetherMetrics } from '@tether/telemetry';
import type { SessionLog } from '@tether/session-log';
import type { Appender } from './append.js';
import type { ServiceAudit } from './audit.js';
import { sessionIdOf, textOf, toProtoSession } from './convert.js';
import { invalid } from './errors.js';
import { CALLER_META_KEY, notFound, RESERVED_META_PREFIX } from './scope.js';
import type { CallerScope } from './scope.js';
import type { UnaryContext } from './unary.js';

const MAX_META_ENTRIES = 32;
const MAX_META_BYTES = 4096;
const MAX_PRINCIPAL_BYTES = 1024;

/**
 * The digest stored for a caller's principal. The service never keeps what a
 * caller sends as a principal, only its SHA-256 (`principalDigest`), so a
 * caller that passes a raw credential by mistake does not leak it into the
 * registry. The caller is part of it: principals are the caller's own names
 * (two custom servers may both have a "user-1"), so one caller's users can
 * never fill another's places under `--max-sessions-per-principal`.
 */
export function principalOf(caller: string, principal: string): string {
  if (Buffer.byteLength(principal, 'utf8') > MAX_PRINCIPAL_BYTES) throw invalid(`principal is longer than ${MAX_PRINCIPAL_BYTES} bytes`);
  return principalDigest(`${caller}\0${principal}`);
}

function metaOf(meta: Readonly<Record<string, string>>): Record<string, string> {
  const entries = Object.entries(meta);
  if (entries.length > MAX_META_ENTRIES) throw invalid(`meta holds at most ${MAX_META_ENTRIES} entries, got ${entries.length}`);
  let bytes = 0;
  for (const [key, value] of entries) {
    if (key === '' || key.startsWith(RESERVED_META_PREFIX)) throw invalid(`meta key '${key.slice(0, 64)}' is empty or reserved (keys starting with '${RESERVED_META_PREFIX}')`);
    bytes += Buffer.byteLength(key, 'utf8') + Buffer.byteLength(value, 'utf8');
  }
  if (bytes > MAX_META_BYTES) throw invalid(`meta is ${bytes} bytes; at most ${MAX_META_BYTES} are kept`);
  return { ...meta };
}

export class SessionHandlers {
  readonly #log: SessionLog;
  readonly #scope: CallerScope;
  readonly #appender: Appender;
  readonly #metrics: TetherMetrics;
  readonly #audit: ServiceAudit;

  constructor(log: SessionLog, scope: CallerScope, appender: Appender, metrics: TetherMetrics, audit: ServiceAudit) {
    this.#log = log;
    this.#scope = scope;
    this.#appender = appender;
    this.#metrics = metrics;
    this.#audit = audit;
  }

  async open(req: OpenSessionRequest, ctx: UnaryContext): Promise<OpenSessionResponse> {
    const principal = principalOf(ctx.caller, req.principal);
    let record;
    try {
      record = await this.#log.createSession(principal, { ...metaOf(req.meta), [CALLER_META_KEY]: ctx.caller });
    } catch (err) {
      if (isSessionLogError(err, 'too_many_sessions')) this.#metrics.sessionsRefused.add(1, { reason: err.code });
      throw err;
    }
    this.#scope.remember(record.sessionId, ctx.caller);
    // A session opened through the cursor API is what a gateway's initialize is.
    if (!ctx.auditedByCaller) this.#audit.record(record.sessionId, { kind: 'initialize' });
    return { session: toProtoSession(record) };
  }

  async get(req: GetSessionRequest, ctx: UnaryContext): Promise<GetSessionResponse> {
    const sessionId = sessionIdOf(req.sessionId);
    const record = await this.#log.sessions.authorize(sessionId, principalOf(ctx.caller, req.principal));
    if (record.meta[CALLER_META_KEY] !== ctx.caller) throw notFound(sessionId);
    this.#scope.remember(sessionId, ctx.caller);
    return { session: toProtoSession(record) };
  }

  async touch(req: TouchSessionRequest, ctx: UnaryContext): Promise<TouchSessionResponse> {
    const sessionId = sessionIdOf(req.sessionId);
    if (!(await this.#scope.owns(sessionId, ctx.caller))) return { touched: false };
    const record = await this.#log.sessions.touch(sessionId);
    return { touched: record?.state === 'active' };
  }

  async close(req: CloseSessionRequest, ctx: UnaryContext): Promise<CloseSessionResponse> {
    const sessionId = sessionIdOf(req.sessionId);
    if (!(await this.#scope.owns(sessionId, ctx.caller))) return { closed: false };
    const from = req.from === '' ? undefined : textOf('from', req.from, 256);
    const closed = await this.#log.closeSession(sessionId, from);
    this.#appender.forgetSession(sessionId);
    if (closed && !ctx.auditedByCaller) this.#audit.record(sessionId, { kind: 'close', reason: 'close_session' });
    return { closed };
  }
}
