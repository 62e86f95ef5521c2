import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { SessionLogConfig } from './config.js';
import type { ControlFanout } from './control-fanout.js';
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
}
