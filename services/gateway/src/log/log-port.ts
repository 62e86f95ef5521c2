import type { EventKind } from '@tether/protocol';
import type {
  AdminAnswer,
  AdminRequest,
  AppendOptions,
  AuditEvent,
  AppendResult,
  ControlMessage,
  Cursor,
  FollowOptions,
  LogEvent,
  ResumeResult,
  ServerReport,
  SessionRecord,
  StreamReader,
  TaskEvents,
  TaskTable,
  WriterState,
  WritesStream,
} from '@tether/session-log';

/**
 * Everything the gateway asks of the log, and nothing more. Two
 * implementations: `createLocalLog` (the session-log library in-process, on
 * JetStream) and `createGrpcLog` (the session-log service over gRPC, so the
 * gateway holds no NATS credentials). The gateway's e2e suite runs in both.
 *
 * Errors are `SessionLogError`s with the library's codes in both modes.
 */
export interface LogPort {
  /** Human-readable mode and target, for logs and /readyz. */
  readonly describe: string;
  /**
   * The streams the log is spread over (`--log-partitions`), for the
   * startup line and /readyz; undefined over gRPC, where the service lays
   * out the log and logs its own.
   */
  readonly partitions: number | undefined;

  createSession(principal: string, meta: Readonly<Record<string, string>>): Promise<SessionRecord>;
  /** The active session owned by `principal`, else `session_not_found`. */
  authorize(sessionId: string, principal: string): Promise<SessionRecord>;
  /** Restarts the session's idle clock. */
  touchSession(sessionId: string): Promise<void>;
  /** Marks closed, purges, and tells every instance (control `closed`). False when unknown. */
  closeSession(sessionId: string, from: string): Promise<boolean>;

  append(sessionId: string, stream: string, kind: EventKind, payload: Uint8Array, options?: AppendOptions): Promise<AppendResult>;
  /** The last event of a stream, or undefined when it has none. */
  head(sessionId: string, stream: string): Promise<LogEvent | undefined>;

  /**
   * Up to `limit` stored events of a stream after `afterSeq` (a writer taking
   * over reads what the stream holds). With `afterPos`, the position of the
   * event at `afterSeq`, the page starts there instead of scanning the stream
   * from its start.
   */
  readPage(sessionId: string, stream: string, afterSeq: number, limit: number, afterPos?: number): Promise<LogEvent[]>;

  /** DESIGN section 7 classification; on `resumed`, `events()` yields the suffix. */
  resume(sessionId: string, lastEventId: string, principal: string): Promise<ResumeResult>;
  /** Events of a stream after `from`, replay then live, ending after its `end`. */
  follow(sessionId: string, stream: string, from: Cursor, options?: FollowOptions): AsyncGenerator<LogEvent, void, undefined>;
  /**
   * A reader opened now, before the stream's next append or head read, so
   * its `follow` can start live without a replay (in-process mode; over
   * gRPC it is a plain follow). `close` it if it will never follow.
   */
  openReader(session: SessionRecord, stream: string): StreamReader;

  /**
   * Holds this process's writer presence (`writerId`) until `close()`:
   * probes of it are answered from `writes`. In-process one NATS
   * subscription; over gRPC one HoldPresence call, opened again if it breaks.
   */
  holdPresence(writerId: string, writes: WritesStream): { close(): Promise<void> };
  /** Whether a writer still writes a stream (without one: whether it lives); silent after `timeoutMs` (default 500). */
  probeWriter(writerId: string, sessionId?: string, stream?: string, timeoutMs?: number): Promise<WriterState>;

  /**
   * Fire-and-forget audit event of a session (metadata only). In-process a
   * core publish to `<prefix>.audit.<session>`, captured by the log stream;
   * over gRPC a `RecordAudit` call, not awaited.
   */
  audit(sessionId: string, event: AuditEvent): void;
  /**
   * Calls `listener` with each operator request addressed to this instance
   * (`<prefix>.admin.<instance>`, from tether-admin) until the returned
   * function is called; `reply` answers it. Over gRPC the session-log
   * service holds that subject for the gateway (WatchAdmin, AnswerAdmin).
   */
  listenAdmin(instanceId: string, listener: (request: AdminRequest, reply: (answer: AdminAnswer) => void) => void): () => void;

  /** Fire-and-forget control message to every instance following the session. */
  publishControl(message: ControlMessage): void;
  /**
   * Calls `listener` with each control message of one session until the
   * returned function is called. In-process from the connection's one
   * control subscription (no subscription, generator or timer per session);
   * over gRPC one WatchControl call per session.
   */
  listenControl(sessionId: string, listener: (message: ControlMessage) => void): () => void;

  /**
   * The durable task records (2026-07-28 tasks at the edge), their change
   * feed and the cancel requests between instances: the library's
   * `TaskTable` in-process, or the same table behind the service's task
   * RPCs over gRPC (`grpc-tasks.ts`).
   */
  readonly openTasks?: (maxTtlMs: number) => Promise<TaskPort>;
  /** The recorded notifications of tasks (`--experimental-task-streams`); in-process only (no RPCs yet). */
  readonly openTaskEvents?: (maxTtlMs: number, maxEventsPerTask: number) => Promise<TaskEvents>;

  /** True when the log can take requests (for /readyz). */
  ready(): Promise<boolean>;
  /**
   * The nats-server the log talks to and the read paths it takes there (for
   * the startup line and /readyz); undefined over gRPC, where the service
   * talks to NATS and logs its own.
   */
  server(): ServerReport | undefined;
  close(): Promise<void>;
}

/** What the gateway uses of the task table (`TaskTable` of @tether/session-log). */
export type TaskPort = Pick<TaskTable, 'create' | 'read' | 'update' | 'watch' | 'serveCancels' | 'requestCancel'> & {
  /**
   * The tasks `working` with a runner, for the sweeper (`tasks/sweeper.ts`):
   * in-process the library's `WorkingTaskIndex` (one headers-only consumer),
   * over gRPC the service's index through ListWorkingTasks (this caller's).
   */
  openWorking(): Promise<WorkingTasks>;
};

/** A task and the writer its record names as runner. */
export interface WorkingTaskRef {
  readonly taskId: string;
  readonly runner: string;
}

/** What the sweeper lists each tick; entries may be a moment stale (read the record before deciding). */
export interface WorkingTasks {
  list(): readonly WorkingTaskRef[] | Promise<readonly WorkingTaskRef[]>;
  close(): Promise<void>;
}
