import { isSessionId } from '@tether/protocol';
import type { SessionRecord } from '@tether/session-log';
import type { InspectAccess, PartitionAccess } from './access.js';
import { InspectError, InspectErrorCode } from './errors.js';
import { auditPrefix, eachPartition } from './read.js';
import { isSessionTag, sessionTag } from './tag.js';

/** A session as the registry (or, once it left the registry, only its audit subject) knows it. */
export interface KnownSession {
  readonly sessionId: string;
  readonly tag: string;
  /** Undefined when the registry no longer holds it (idled out or closed long ago): only its audit events remain. */
  readonly record: SessionRecord | undefined;
}

/** Registry and log reads in flight at once (per listing). */
export const READ_PARALLEL = 32;

/**
 * Every session the deployment still knows: each registry entry of every
 * partition, plus every session with audit events but no entry (its record
 * expired; the audit events last until the log's `max_age`). One key
 * listing per partition and one read per entry, 32 at a time.
 */
export async function scanSessions(access: InspectAccess): Promise<KnownSession[]> {
  const ids = new Set<string>();
  // The bucket each key was listed from: the one its record is read from.
  const bucketOf = new Map<string, PartitionAccess>();
  const keys = await eachPartition(access, async (p) => {
    const found: string[] = [];
    try {
      for await (const key of await p.sessions.keys()) if (isSessionId(key)) found.push(key);
    } catch (err) {
      throw new InspectError(InspectErrorCode.unavailable, `cannot list the session registry ${p.sessionsBucket}: ${String(err)}`, { cause: err });
    }
    return found;
  });
  for (const [index, found] of keys.entries()) {
    for (const id of found) {
      ids.add(id);
      bucketOf.set(id, access.partitions[index]!);
    }
  }
  const records = new Map<string, SessionRecord>();
  const list = [...ids];
  for (let i = 0; i < list.length; i += READ_PARALLEL) {
    await Promise.all(
      list.slice(i, i + READ_PARALLEL).map(async (id) => {
        const entry = await bucketOf.get(id)!.sessions.get(id).catch(() => null);
        if (entry === null || entry.operation !== 'PUT') return;
        try {
          records.set(id, JSON.parse(entry.string()) as SessionRecord);
        } catch {
          // Not a record: skipped (the gateways would refuse it too).
        }
      }),
    );
  }
  for (const id of await auditedSessions(access)) ids.add(id);
  return [...ids].map((sessionId) => ({ sessionId, tag: sessionTag(sessionId), record: records.get(sessionId) }));
}

/** Session ids that have audit events in the log (from the streams' subject counts). */
async function auditedSessions(access: InspectAccess): Promise<string[]> {
  return [...(await auditCounts(access)).keys()];
}

/** How many audit events each session has in the log: one stream info per partition with a subjects filter (counts, no messages read). */
export async function auditCounts(access: InspectAccess): Promise<Map<string, number>> {
  const perPartition = await eachPartition(access, async (p) => {
    const prefix = auditPrefix(access, p.index);
    try {
      const info = await access.jsm.streams.info(p.streamName, { subjects_filter: access.subjects.partitionAuditWildcard(p.index) });
      const counts: [string, number][] = [];
      for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
        const id = subject.slice(prefix.length);
        if (isSessionId(id)) counts.push([id, n]);
      }
      return counts;
    } catch (err) {
      throw new InspectError(InspectErrorCode.unavailable, `cannot list audit subjects of ${p.streamName}: ${String(err)}`, { cause: err });
    }
  });
  return new Map(perPartition.flat());
}

/**
 * The session a tag names, found by scanning (a tag cannot be turned back
 * into an id). `invalid_argument` for something that is not a tag,
 * `session_not_found` when no known session has it.
 */
export async function resolveTag(access: InspectAccess, tag: string, known?: readonly KnownSession[]): Promise<KnownSession> {
  if (!isSessionTag(tag)) throw new InspectError(InspectErrorCode.invalidArgument, `not a session tag: ${JSON.stringify(tag.slice(0, 40))}; a tag is s_ and 12 base64url characters (tether-admin sessions lists them)`);
  const found = (known ?? (await scanSessions(access))).find((s) => s.tag === tag);
  if (found === undefined) throw new InspectError(InspectErrorCode.sessionNotFound, `no session with tag ${tag} in ${access.logName} (closed sessions stay visible until the log's max_age)`);
  return found;
}
