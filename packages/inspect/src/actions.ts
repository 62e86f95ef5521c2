import { AdminRequestType, AuditKind, ControlType, encodeAuditEvent, SessionRegistry } from '@tether/session-log';
import type { AdminAnswer, AuditEvent } from '@tether/session-log';
import type { InspectAccess } from './access.js';
import { InspectError, InspectErrorCode } from './errors.js';
import { resolveTag } from './registry.js';
import type { KnownSession } from './registry.js';

/** The name tether-admin's own audit events and control messages carry. */
export const ADMIN_INSTANCE = 'tether-admin';

export interface CloseOutcome {
  readonly tag: string;
  /** False when the session was already closed (or only its audit events remain): nothing was changed but the purge. */
  readonly closed: boolean;
}

/**
 * Closes a session on every instance, as a gateway's DELETE does: marks it
 * closed in the registry, purges its events, and publishes control
 * `closed`, on which every instance ends its deliveries and writers of the
 * session. Records an audit `close` (instance `tether-admin`). What it does
 * not do: DELETE the upstream's session (tether-admin has no credentials
 * of the client's to send there; the upstream's own idle timeout ends it),
 * or free the session's place in a `--max-sessions-per-principal` count
 * (the next creation by that principal finds it closed and frees it).
 */
export async function closeSessionByTag(access: InspectAccess, tag: string, known?: readonly KnownSession[]): Promise<CloseOutcome> {
  const session = await resolveTag(access, tag, known);
  const wasActive = session.record?.state === 'active';
  // The session's partition holds its registry entry and its events; the subjects carry the partition too.
  const partition = access.partitionOf(session.sessionId);
  try {
    if (session.record !== undefined) await new SessionRegistry((id) => access.partitionOf(id).sessions).markClosed(session.sessionId);
    await access.jsm.streams.purge(partition.streamName, { filter: access.subjects.sessionLogs(session.sessionId) });
  } catch (err) {
    throw new InspectError(InspectErrorCode.unavailable, `closing ${tag} failed: ${String(err)}`, { cause: err });
  }
  access.nc.publish(access.subjects.control(session.sessionId), JSON.stringify({ type: ControlType.closed, sessionId: session.sessionId, from: ADMIN_INSTANCE }));
  const event: AuditEvent = { v: 1, atMs: Date.now(), instance: ADMIN_INSTANCE, kind: AuditKind.close, reason: 'admin' };
  access.nc.publish(access.subjects.audit(session.sessionId), encodeAuditEvent(event));
  await access.nc.flush();
  return { tag, closed: wasActive };
}

/** How long tether-admin waits for more addresses after the last one came (a name answered by one gateway answers at once). */
const WHERE_STALL_MS = 150;
const WHERE_MAX_WAIT_MS = 1_000;

/**
 * Asks one gateway instance (by its `--instance-id`) to drain, as SIGTERM
 * would: it answers, then refuses new work, hands its client streams to
 * the other instances and exits. Gateways with the log in-process listen on
 * `<prefix>.admin.<instance>` themselves. A gateway on `--log grpc://`
 * listens through its session-log service (WatchAdmin) at an address of
 * its caller's, `grpc.<caller tag>.<instance>`, so that another caller
 * naming the same instance never gets its requests: the address is asked
 * for by name first (`<prefix>.admin_where.<instance>`) and the request
 * goes there. Two or more addresses for one name (two callers name an
 * instance so) drain nothing: `invalid_argument`, naming them, to drain one
 * by its address (which its gateway logs). The service answers `ok: false`
 * with a timeout detail if the gateway does not. `instance_not_found` when
 * no instance of that name listens (on this namespace), or none answered
 * in `timeoutMs`.
 */
export async function requestDrain(access: InspectAccess, instance: string, timeoutMs = 3_000): Promise<AdminAnswer> {
  if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(instance) || instance.includes('..') || instance.startsWith('.') || instance.endsWith('.')) {
    throw new InspectError(InspectErrorCode.invalidArgument, `not an instance id: ${JSON.stringify(instance.slice(0, 40))}; instance ids are the gateways' --instance-id (letters, digits, _ - : and single dots)`);
  }
  const addresses = await addressesOf(access, instance, Math.min(timeoutMs, WHERE_MAX_WAIT_MS));
  if (addresses.length > 1) {
    throw new InspectError(InspectErrorCode.invalidArgument, `${addresses.length} gateways on --log grpc:// of different callers of the session-log service are named ${instance}; drained none: name one by its address (each gateway logs it): ${addresses.join(', ')}`);
  }
  const subject = access.subjects.admin(addresses[0] ?? instance);
  let reply;
  try {
    reply = await access.nc.request(subject, JSON.stringify({ type: AdminRequestType.drain, from: ADMIN_INSTANCE }), { timeout: timeoutMs });
  } catch (err) {
    const code = (err as { code?: string }).code;
    const text = String(err);
    if (code === '503' || /no responders|timeout/i.test(text)) {
      throw new InspectError(InspectErrorCode.instanceNotFound, `no gateway instance ${instance} answered on ${subject} (${/timeout/i.test(text) ? 'timeout' : 'no responders'}): check the name (its --instance-id) and --namespace; a gateway on --log grpc:// listens through its session-log service, so that service must run a version with WatchAdmin and share this NATS and namespace`, { cause: err });
    }
    throw new InspectError(InspectErrorCode.unavailable, `drain request failed: ${text}`, { cause: err });
  }
  return JSON.parse(reply.string()) as AdminAnswer;
}

/** The distinct addresses session-log services give for `instance` (none: no gateway on --log grpc:// is named so). */
async function addressesOf(access: InspectAccess, instance: string, maxWaitMs: number): Promise<string[]> {
  const found = new Set<string>();
  try {
    for await (const msg of await access.nc.requestMany(access.subjects.adminWhere(instance), '', { strategy: 'stall', stall: WHERE_STALL_MS, maxWait: maxWaitMs })) {
      const address = msg.string();
      // Only an address of this very instance: `grpc.<22-character tag>.<instance>`.
      if (/^grpc\.[A-Za-z0-9_-]{22}\./.test(address) && address.endsWith(`.${instance}`) && address.length === 28 + instance.length) found.add(address);
    }
  } catch {
    // No responders: no gateway on --log grpc:// of that name (an in-process one does not answer here).
  }
  return [...found].sort();
}
