/**
 * `tether-sdk-example` as the chaos harness runs it: the example's own bin
 * (`examples/sdk-server/dist/main.js`, every flag passed through), with its
 * session log laid out like the chaos gateways' (`--log-replicas 3
 * --namespace <run>`), which the example has no flags for. Its
 * `SessionLog.create` gets `replicas` and `namespace` from
 * `TETHER_CHAOS_LOG_REPLICAS` and `TETHER_CHAOS_NAMESPACE`; nothing else
 * changes (its durable tasks bucket stays R1, unused by the chaos clients).
 * A partitioned log's count is the example's own `--log-partitions`, which
 * the harness passes through.
 *
 *   node --import tsx test/chaos/sdk-example-main.ts --port 0 --nats nats://… --instance sdk1.0
 */
import { SessionLog } from '@tether/session-log';
import type { CreateSessionLogOptions } from '@tether/session-log';

const replicas = Number(process.env['TETHER_CHAOS_LOG_REPLICAS'] ?? '3');
const namespace = process.env['TETHER_CHAOS_NAMESPACE'];
const create = SessionLog.create.bind(SessionLog);
// The example imports the same module instance (one resolved file), so it calls this.
(SessionLog as { create: (options?: CreateSessionLogOptions) => Promise<SessionLog> }).create = (options = {}) =>
  create({ ...options, replicas, ...(namespace === undefined || namespace === '' ? {} : { namespace }) });

// Whoever started us SIGKILLs us when it exits; if it was SIGKILLed itself, we notice being re-parented.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(1);
}, 1_000).unref();

await import('../../examples/sdk-server/dist/main.js');
