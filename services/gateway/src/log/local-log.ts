import { SessionLog } from '@tether/session-log';
import type { CreateSessionLogOptions } from '@tether/session-log';
import type { LogPort } from './log-port.js';
import { SessionCache } from './session-cache.js';

/** How long a probed writer has to answer before it counts as silent. */
const PROBE_TIMEOUT_MS = 500;

/** The log in-process: the gateway talks to JetStream directly (no gRPC hop on the hot path). */
export async function createLocalLog(options: CreateSessionLogOptions): Promise<LogPort> {
  const log = await SessionLog.create(options);
  const nc = log.connection;
  const sessions = new SessionCache(
    (listener) => log.listenAllControl(listener),
    log.config.sessionIdleMs,
    (sessionId, principal) => log.sessions.authorize(sessionId, principal),
  );
  return {
    describe: `jetstream ${streamsOf(log)} via ${nc.getServer()}`,
    partitions: log.layout.partitions.length,
    createSession: async (principal, meta) => {
      const record = await log.createSession(principal, meta);
      sessions.remember(record);
      return record;
    },
    authorize: (sessionId, principal) => sessions.authorize(sessionId, principal),
    touchSession: async (sessionId) => {
      await log.sessions.touch(sessionId);
      sessions.touched(sessionId);
    },
    closeSession: (sessionId, from) => {
      sessions.forget(sessionId);
      return log.closeSession(sessionId, from);
    },
    append: (sessionId, stream, kind, payload, appendOptions) => log.append(sessionId, stream, kind, payload, appendOptions),
    head: (sessionId, stream) => log.head(sessionId, stream),
    readPage: (sessionId, stream, afterSeq, limit, afterPos) => log.readPage(sessionId, stream, afterSeq, limit, afterPos),
    resume: (sessionId, lastEventId, principal) => log.resume(sessionId, lastEventId, principal),
    follow: (sessionId, stream, from, followOptions) => log.follow(sessionId, stream, from, followOptions),
    openReader: (session, stream) => log.openReader(session, stream),
    holdPresence: (writerId, writes) => log.holdPresence(writerId, writes),
    probeWriter: (writerId, sessionId, stream, timeoutMs) => log.probeWriter(writerId, timeoutMs ?? PROBE_TIMEOUT_MS, sessionId, stream),
    audit: (sessionId, event) => log.recordAudit(sessionId, event),
    listenAdmin: (instanceId, listener) => log.listenAdmin(instanceId, listener),
    publishControl: (message) => log.publishControl(message),
    listenControl: (sessionId, listener) => log.listenControl(sessionId, listener),
    openTasks: (maxTtlMs) => log.openTasks(maxTtlMs),
    openTaskEvents: (maxTtlMs, maxEventsPerTask) => log.openTaskEvents(maxTtlMs, maxEventsPerTask),
    ready: async () => !nc.isClosed() && !nc.isDraining() && nc.info !== undefined,
    server: () => log.server,
    close: async () => {
      sessions.close();
      await log.close();
    },
  };
}

/** `TETHER_LOG`, or the first and last of a partitioned log's streams: `TETHER_LOG-0 … TETHER_LOG-3`. */
function streamsOf(log: SessionLog): string {
  const { partitions } = log.layout;
  const first = partitions[0]?.streamName ?? log.config.streamName;
  return partitions.length <= 1 ? first : `${first} … ${partitions[partitions.length - 1]?.streamName ?? ''}`;
}
