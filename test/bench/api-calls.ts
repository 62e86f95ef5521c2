import type { Msg, NatsConnection } from '@nats-io/transport-node';
import type { SessionLog } from '@tether/session-log';
import type { LogFill } from './fill.js';
import { resumeOnce } from './resume.js';
import type { SamplePlan } from './resume.js';

/**
 * JetStream API requests one resume makes, counted by listening on
 * `$JS.API.>` from a second connection (core subscriptions are not counted).
 * A batch direct get (`DIRECT.GET`) is one request however many messages it
 * answers with: the answers go to the requester's inbox, which this does not
 * see. Any other kind (`STREAM.MSG.GET`, a consumer's requests) is counted
 * under its own name, so a read path that changes shows.
 */
export async function countResumeApiCalls(
  monitor: NatsConnection,
  log: SessionLog,
  fill: LogFill,
  principal: string,
  plan: SamplePlan,
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  const sub = monitor.subscribe('$JS.API.>', {
    callback: (_err, msg) => {
      const key = apiKind(msg);
      counts[key] = (counts[key] ?? 0) + 1;
    },
  });
  await monitor.flush();
  await log.connection.flush();
  await resumeOnce(log, fill, principal, plan);
  // A request the reader sends without waiting for its answer (a cleanup) is given time to land.
  await new Promise((resolve) => setTimeout(resolve, 200));
  await log.connection.flush();
  await monitor.flush();
  sub.unsubscribe();
  return counts;
}

/** `STREAM.MSG.GET last_by_subj (registry)`, `DIRECT.GET batch (log)`, `CONSUMER.CREATE`, ... */
export function apiKind(msg: Pick<Msg, 'subject' | 'data'>): string {
  const tokens = msg.subject.split('.').slice(2);
  const [a = '', b = '', c = '', d = ''] = tokens;
  if (a === 'STREAM' && b === 'MSG' && c === 'GET') return `STREAM.MSG.GET ${getKind(msg.data)} ${owner(d)}`;
  if (a === 'DIRECT' && b === 'GET') {
    // `$JS.API.DIRECT.GET.<stream>.<subject>` is a last-by-subject get with no body.
    const kind = tokens.length > 3 ? 'last_by_subj' : getKind(msg.data);
    return `DIRECT.GET ${kind} ${owner(c)}`;
  }
  if (a === 'CONSUMER' && b === 'MSG' && c === 'NEXT') return 'CONSUMER.MSG.NEXT (fetch)';
  return `${a}.${b}`;
}

function owner(stream: string): string {
  return stream.startsWith('KV_') ? '(registry)' : '(log)';
}

/** What a get request asks for, from its JSON body: `batch`, `multi_last`, `next_by_subj`, `last_by_subj` or `seq`. */
function getKind(data: Uint8Array): string {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(new TextDecoder().decode(data)) as Record<string, unknown>;
  } catch {
    return '?';
  }
  for (const key of ['batch', 'multi_last', 'next_by_subj', 'last_by_subj', 'seq']) if (key in body) return key;
  return '?';
}
