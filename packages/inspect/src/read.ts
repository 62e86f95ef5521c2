import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import type { JsMsg } from '@nats-io/jetstream';
import { decodeAuditEvent } from '@tether/session-log';
import type { AuditEvent } from '@tether/session-log';
import { LogHeader } from '@tether/protocol';
import type { InspectAccess, PartitionAccess } from './access.js';
import { InspectError, InspectErrorCode } from './errors.js';

const NANOS_PER_MS = 1_000_000;
const FETCH_BATCH = 256;

/**
 * One stored message of a session stream as the read model sees it: the
 * chain headers as written (unchecked: `checkChains` judges them), its
 * position, time and payload size. The payload itself is never kept.
 */
export interface RawEvent {
  readonly stream: string;
  readonly pos: number;
  readonly atMs: number;
  readonly bytes: number;
  /** Undefined when the header is missing or not a number. */
  readonly seq: number | undefined;
  readonly prev: number | undefined;
  readonly epoch: string | undefined;
  readonly kind: string | undefined;
  readonly writer: string | undefined;
  readonly endReason: string | undefined;
}

/**
 * Every message of `stream` under `filter` in log order, through one
 * ephemeral consumer. With `lastPerSubject`, only the last message of each
 * subject under it.
 */
export async function readAll<T>(access: InspectAccess, stream: string, filter: string, map: (msg: JsMsg) => T | undefined, lastPerSubject = false): Promise<T[]> {
  let info;
  try {
    info = await access.jsm.consumers.add(stream, {
      filter_subject: filter,
      deliver_policy: lastPerSubject ? DeliverPolicy.LastPerSubject : DeliverPolicy.All,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: 30_000 * NANOS_PER_MS,
    });
  } catch (err) {
    throw new InspectError(InspectErrorCode.unavailable, `cannot read ${filter} from ${stream}: ${String(err)}`, { cause: err });
  }
  const out: T[] = [];
  try {
    let pending = info.num_pending;
    const consumer = access.js.consumers.getConsumerFromInfo(info);
    while (pending > 0) {
      let delivered = 0;
      const batch = await consumer.fetch({ max_messages: Math.min(FETCH_BATCH, pending), expires: access.timeoutMs });
      for await (const msg of batch) {
        delivered += 1;
        pending = msg.info.pending;
        const value = map(msg);
        if (value !== undefined) out.push(value);
        if (pending === 0) break;
      }
      // Counted messages can age out before the fetch: an empty batch means nothing more.
      if (delivered === 0) break;
    }
  } catch (err) {
    throw new InspectError(InspectErrorCode.unavailable, `reading ${filter} failed: ${String(err)}`, { cause: err });
  } finally {
    access.jsm.consumers.delete(stream, info.name).catch(() => undefined);
  }
  return out;
}

/** Every stored event of every stream of a session, in log order (its partition's stream). */
export function readSessionEvents(access: InspectAccess, sessionId: string): Promise<RawEvent[]> {
  const prefix = access.subjects.log(sessionId, '');
  return readAll(access, access.partitionOf(sessionId).streamName, access.subjects.sessionLogs(sessionId), (msg) => {
    const h = msg.headers;
    const text = (name: string): string | undefined => {
      const value = h?.get(name);
      return value === undefined || value === '' ? undefined : value;
    };
    return {
      stream: msg.subject.slice(prefix.length),
      pos: msg.seq,
      atMs: Math.floor(msg.info.timestampNanos / NANOS_PER_MS),
      bytes: msg.data.length,
      seq: count(text(LogHeader.seq)),
      prev: count(text(LogHeader.prev)),
      epoch: text(LogHeader.epoch),
      kind: text(LogHeader.kind),
      writer: text(LogHeader.writer),
      endReason: text(LogHeader.endReason),
    };
  });
}

/** The audit events of one session, oldest first (what its gateways recorded). */
export function readSessionAudit(access: InspectAccess, sessionId: string): Promise<AuditEvent[]> {
  return readAll(access, access.partitionOf(sessionId).streamName, access.subjects.audit(sessionId), (msg) => decodeAuditEvent(msg.data));
}

/** `<prefix>.audit.` (`<prefix>.audit.<index>.` with partitions): what precedes the session id in partition `index`'s audit subjects. */
export function auditPrefix(access: InspectAccess, index: number): string {
  return access.subjects.partitionAuditWildcard(index).slice(0, -1);
}

/** The audit events of every session still retained, by session id (one pass per partition; for the session list). */
export async function readAllAudit(access: InspectAccess): Promise<Map<string, AuditEvent[]>> {
  const perPartition = await eachPartition(access, (p) => {
    const prefix = auditPrefix(access, p.index);
    return readAll(access, p.streamName, access.subjects.partitionAuditWildcard(p.index), (msg) => {
      const event = decodeAuditEvent(msg.data);
      return event === undefined ? undefined : { sessionId: msg.subject.slice(prefix.length), event };
    });
  });
  const bySession = new Map<string, AuditEvent[]>();
  for (const { sessionId, event } of perPartition.flat()) {
    const list = bySession.get(sessionId) ?? [];
    list.push(event);
    bySession.set(sessionId, list);
  }
  return bySession;
}

/**
 * The last audit message of every session still retained, by session id:
 * its event, or `null` when that message does not decode (the session's
 * last decodable event is then an earlier one). One consumer that delivers
 * one message per subject, however many events each session has.
 */
export async function readLastAudit(access: InspectAccess): Promise<Map<string, AuditEvent | null>> {
  const perPartition = await eachPartition(access, (p) => {
    const prefix = auditPrefix(access, p.index);
    return readAll(access, p.streamName, access.subjects.partitionAuditWildcard(p.index), (msg) => ({ sessionId: msg.subject.slice(prefix.length), event: decodeAuditEvent(msg.data) ?? null }), true);
  });
  return new Map(perPartition.flat().map((r) => [r.sessionId, r.event]));
}

/** Partitions read at once by a pass over all of them (each read is an ephemeral consumer or a stream info). */
const PARTITIONS_PARALLEL = 8;

/** `read` of every partition, at most PARTITIONS_PARALLEL at a time, results by partition index. */
export async function eachPartition<T>(access: InspectAccess, read: (partition: PartitionAccess) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(access.partitions.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < access.partitions.length; i = next++) out[i] = await read(access.partitions[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(PARTITIONS_PARALLEL, access.partitions.length) }, worker));
  return out;
}

/** How many streams each session holds in the log now (`subjects_filter` on the session's subjects, in its partition). */
export async function streamCount(access: InspectAccess, sessionId: string): Promise<number> {
  try {
    const info = await access.jsm.streams.info(access.partitionOf(sessionId).streamName, { subjects_filter: access.subjects.sessionLogs(sessionId) });
    return Object.keys(info.state.subjects ?? {}).length;
  } catch (err) {
    throw new InspectError(InspectErrorCode.unavailable, `cannot count the streams of a session: ${String(err)}`, { cause: err });
  }
}

function count(text: string | undefined): number | undefined {
  if (text === undefined || !/^(0|[1-9][0-9]{0,15})$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}
