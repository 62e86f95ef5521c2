import type { NatsConnection } from '@nats-io/transport-node';
import { NAMESPACE_ALLOWED, NAMESPACE_PATTERN, namespaceNames } from '@tether/session-log';
import { EventBusError, EventBusErrorCode } from './errors.js';
import { BUS_CHANNEL_PATTERN, DEFAULT_BUS_CHANNEL, busSubject } from './wire.js';

/** Options of {@link createNatsServerEventBus} besides the connection. Every one has a default. */
export interface NatsServerEventBusOptions {
  /**
   * The deployment's namespace, as the log's (`SessionLogOptions.namespace`):
   * the subject prefix derives from it (`tether`, or `tether_<ns>`), so the
   * buses of two namespaces never meet. Default `''`.
   */
  readonly namespace?: string;
  /** First subject token(s). Default: the namespace's, as the session log's (`namespaceNames(namespace).subjectPrefix`). */
  readonly subjectPrefix?: string;
  /**
   * One MCP server's events: every instance of one server (the same tools,
   * resources and prompts) uses one channel; two different servers sharing a
   * namespace use two, or each would tell the other's clients that its
   * lists changed. One subject token (letters, digits, `_`, `-`; at most 64).
   * Default `default`.
   */
  readonly channel?: string;
  /**
   * After NATS comes back from a disconnect, deliver `tools_list_changed`,
   * `prompts_list_changed` and `resources_list_changed` to this process's
   * listeners (each stream still gets only what its filter asked for and
   * the server advertises), because events other instances published
   * meanwhile never reached them. A list-changed notification only tells a
   * client to list again, so one too many costs a list; one missed leaves
   * it with a stale list. A missed `resource_updated` cannot be repaired
   * this way (the bus does not know which URIs listeners watch). Default true.
   */
  readonly resyncOnReconnect?: boolean;
  /**
   * Errors that have no caller to throw to: a listener that threw, a
   * malformed message on the bus subject, the NATS subscription failing.
   * They carry sizes and reasons, never an event. Default: ignored.
   */
  readonly onerror?: (error: Error) => void;
}

/** The connection: one the caller owns (never closed by the bus), or servers the bus connects to and owns. */
export type NatsServerEventBusConnection =
  | { readonly nc: NatsConnection; readonly servers?: never }
  | { readonly servers: string | readonly string[]; readonly nc?: never };

export type CreateNatsServerEventBusOptions = NatsServerEventBusOptions & NatsServerEventBusConnection;

export interface EventBusConfig {
  readonly subject: string;
  readonly resyncOnReconnect: boolean;
}

const SUBJECT_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/** Fills defaults and validates; a bad value is refused naming its key and what is allowed. */
export function resolveEventBusConfig(options: NatsServerEventBusOptions): EventBusConfig {
  const namespace = options.namespace ?? '';
  // Checked before anything is derived from it: a bad namespace is named as such, not as the prefix it would make.
  if (namespace !== '' && (typeof namespace !== 'string' || !NAMESPACE_PATTERN.test(namespace))) bad('namespace', namespace, NAMESPACE_ALLOWED);
  const subjectPrefix = options.subjectPrefix ?? namespaceNames(namespace).subjectPrefix;
  if (typeof subjectPrefix !== 'string' || !SUBJECT_PREFIX.test(subjectPrefix)) bad('subjectPrefix', subjectPrefix, 'dot-separated tokens of letters, digits, _ and -');
  const channel = options.channel ?? DEFAULT_BUS_CHANNEL;
  if (typeof channel !== 'string' || !BUS_CHANNEL_PATTERN.test(channel)) bad('channel', channel, 'one token of letters, digits, _ and -, at most 64');
  const resync = options.resyncOnReconnect ?? true;
  if (typeof resync !== 'boolean') bad('resyncOnReconnect', resync, 'a boolean');
  return { subject: busSubject(subjectPrefix, channel), resyncOnReconnect: resync };
}

function bad(key: string, value: unknown, want: string): never {
  throw new EventBusError(EventBusErrorCode.invalidConfig, `${key} is ${JSON.stringify(value)}, must be ${want}`, { detail: { key } });
}
