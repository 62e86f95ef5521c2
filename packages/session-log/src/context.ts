import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { SessionLogConfig } from './config.js';
import type { ControlFanout } from './control-fanout.js';
import type { LogPaths } from './server-features.js';
import type { Subjects } from './wire.js';

/** What the log's parts share: one connection, the resolved config, the subjects, the control subscriptions. */
export interface LogContext {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly config: SessionLogConfig;
  readonly subjects: Subjects;
  /** One subscription per session's control subject, shared by every reader and watcher. */
  readonly control: ControlFanout;
  /** The read paths the server the connection talks to *now* allows (it may change on reconnect), and the stream's config. */
  readonly paths: () => LogPaths;
}
