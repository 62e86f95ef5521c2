import { jetstream } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { decodeAuditEvent } from '@tether/session-log';
import type { AuditEvent } from '@tether/session-log';

/**
 * Every audit event stored in `stream` under `filter` (a subject, or a
 * wildcard such as `*.audit.<session>`), in order: counted first, so the
 * fetch ends when all are read rather than at its timeout.
 */
export async function readAudit(nc: NatsConnection, jsm: JetStreamManager, stream: string, filter: string): Promise<AuditEvent[]> {
  const info = await jsm.streams.info(stream, { subjects_filter: filter });
  const count = Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0);
  if (count === 0) return [];
  const consumer = await jetstream(nc).consumers.get(stream, { filter_subjects: [filter] });
  const out: AuditEvent[] = [];
  let seen = 0;
  for await (const m of await consumer.fetch({ max_messages: count, expires: 2_000 })) {
    const event = decodeAuditEvent(m.data);
    if (event !== undefined) out.push(event);
    if ((seen += 1) >= count) break;
  }
  return out;
}
