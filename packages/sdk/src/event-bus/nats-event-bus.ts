import { randomBytes } from 'node:crypto';
import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection, Status, Subscription } from '@nats-io/transport-node';
import { decodeEnvelope, encodeEnvelope, toServerEvent } from './codec.js';
import { resolveEventBusConfig } from './config.js';
import type { CreateNatsServerEventBusOptions, EventBusConfig } from './config.js';
import { EventBusError, EventBusErrorCode } from './errors.js';

/** A `ServerEventBus` whose events reach every process subscribed to its subject. */
export interface NatsServerEventBus extends ServerEventBus {
  /** `<prefix>.bus.<channel>`. */
  readonly subject: string;
  /** The largest encoded event `publish` takes now: the connection's `max_payload` (a server may change it on reconnect). */
  readonly maxEventBytes: number;
  /** Listeners in this process (the SDK registers one per open `subscriptions/listen` stream). */
  readonly listenerCount: number;
  /**
   * Unsubscribes from NATS (and waits until the server knows), drops every
   * listener, and closes the connection if the bus opened it. Close the
   * handlers first (`handler.close()` ends their listen streams gracefully).
   * Idempotent.
   */
  close(): Promise<void>;
}

/** nats-server's default `max_payload`, for the moment a reconnecting connection has no INFO. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** Replayed to local listeners after a reconnect (see `resyncOnReconnect`). */
const RESYNC_EVENTS: readonly ServerEvent[] = [{ kind: 'tools_list_changed' }, { kind: 'prompts_list_changed' }, { kind: 'resources_list_changed' }];

/**
 * A `ServerEventBus` on core NATS for `createMcpHandler(factory, { bus })`:
 * an event published on any instance reaches the `subscriptions/listen`
 * streams of every instance on the same subject. Pass the same bus to
 * every handler of the process.
 *
 * - **One NATS subscription per bus**, however many listen streams are
 *   open; events fan out to the listeners in the subscription's callback.
 * - **Local listeners synchronously**, as the SDK's in-memory bus: `publish`
 *   sends to NATS, then calls this process's listeners before it returns.
 *   The publisher skips its own message when NATS echoes it back, so the
 *   bus needs no echo (on a `noEcho` connection it works, but two buses
 *   sharing that connection do not hear each other).
 * - **Order per publisher:** core NATS delivers the messages of one
 *   connection to each subscriber in the order they were published, so every
 *   instance sees one bus's events in publish order. Events of two
 *   publishers may interleave differently on different instances; nothing
 *   orders them.
 * - **At most once:** core NATS keeps nothing. A process that is not
 *   connected when an event is published never gets it (see
 *   `resyncOnReconnect` for what is repaired).
 * - **Disconnected NATS:** `publish` throws `bus_unavailable` and delivers
 *   the event nowhere, not even locally. Letting nats.js take it would be
 *   worse than useless: nats.js 3.4 accepts a publish while reconnecting,
 *   then discards its outbound buffer when it dials again (`prepare()` →
 *   `resetOutbound()`; checked against a killed and restarted server), so the
 *   event would vanish with no error. Between a connection dying and
 *   nats.js noticing (at once for a reset socket, up to its ping interval
 *   times `maxPingOut` for a silent network), a publish still succeeds and
 *   is lost: that is core NATS's at-most-once.
 *
 * Errors: `invalid_config` (here), and from `publish`: `invalid_event`,
 * `event_too_large` (the encoded event, about 50 bytes of envelope included,
 * is over the connection's `max_payload`), `bus_unavailable`, `bus_closed`.
 * Nothing is logged; `onerror` gets what has no caller.
 */
export async function createNatsServerEventBus(options: CreateNatsServerEventBusOptions): Promise<NatsServerEventBus> {
  const config = resolveEventBusConfig(options);
  const given = options.nc;
  const servers = options.servers;
  if ((given === undefined) === (servers === undefined)) {
    throw new EventBusError(EventBusErrorCode.invalidConfig, 'give exactly one of nc (a connection you own) and servers (the bus connects and owns it)', { detail: { key: given === undefined ? 'servers' : 'nc' } });
  }
  let nc: NatsConnection;
  if (given !== undefined) {
    nc = given;
  } else {
    try {
      // Reconnect forever: the bus is meant to live as long as the process.
      // For credentials or TLS, connect yourself and pass `nc`.
      nc = await connect({ servers: typeof servers === 'string' ? servers : [...(servers ?? [])], maxReconnectAttempts: -1, noAsyncTraces: true, name: 'tether-event-bus' });
    } catch (err) {
      throw new EventBusError(EventBusErrorCode.unavailable, 'cannot connect to NATS for the event bus', { subject: config.subject }, { cause: err });
    }
  }
  const bus = new NatsEventBus(nc, given === undefined, config, options.onerror);
  try {
    // The server must know the subscription before the bus is used: a
    // publish from another instance right after this resolves reaches it.
    await nc.flush();
  } catch (err) {
    await bus.close().catch(() => undefined);
    throw new EventBusError(EventBusErrorCode.unavailable, 'NATS did not confirm the event bus subscription', { subject: config.subject }, { cause: err });
  }
  return bus;
}

/** One registration; an object of its own, so a function subscribed twice is two listeners. */
interface ListenerEntry {
  readonly listener: (event: ServerEvent) => void;
}

class NatsEventBus implements NatsServerEventBus {
  readonly subject: string;
  readonly #nc: NatsConnection;
  readonly #ownsConnection: boolean;
  readonly #resyncOnReconnect: boolean;
  readonly #onerror: ((error: Error) => void) | undefined;
  /** Tells this bus's own messages apart when NATS echoes them back. */
  readonly #id = randomBytes(8).toString('hex');
  readonly #listeners = new Set<ListenerEntry>();
  readonly #sub: Subscription;
  readonly #status: AsyncIterable<Status>;
  #connected = true;
  #closing: Promise<void> | undefined;
  #lastMaxPayload: number;
  /** The listener being called, so that one publishing from inside itself is not called back (the SDK's interface asks this). */
  #dispatching: ListenerEntry | undefined;

  constructor(nc: NatsConnection, ownsConnection: boolean, config: EventBusConfig, onerror: ((error: Error) => void) | undefined) {
    this.subject = config.subject;
    this.#nc = nc;
    this.#ownsConnection = ownsConnection;
    this.#resyncOnReconnect = config.resyncOnReconnect;
    this.#onerror = onerror;
    this.#lastMaxPayload = nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
    // Before any await: a disconnect must not slip past unseen.
    this.#status = nc.status();
    void this.#watchConnection();
    this.#sub = nc.subscribe(this.subject, { callback: (err, msg) => (err === null ? this.#received(msg.data) : this.#subscriptionFailed(err)) });
  }

  get maxEventBytes(): number {
    const current = this.#nc.info?.max_payload;
    if (current !== undefined) this.#lastMaxPayload = current;
    return this.#lastMaxPayload;
  }

  get listenerCount(): number {
    return this.#listeners.size;
  }

  publish(event: ServerEvent): void {
    if (this.#closing !== undefined) throw new EventBusError(EventBusErrorCode.closed, 'the event bus is closed', { subject: this.subject });
    const normalized = toServerEvent(event);
    if (normalized === undefined) {
      throw new EventBusError(EventBusErrorCode.invalidEvent, "publish takes a ServerEvent: kind one of tools_list_changed, prompts_list_changed, resources_list_changed, resource_updated (with a string uri), params an object if present", { subject: this.subject });
    }
    let data: Uint8Array;
    try {
      data = encodeEnvelope(this.#id, normalized);
    } catch (err) {
      // JSON.stringify throws on a BigInt or a cycle in params.
      throw new EventBusError(EventBusErrorCode.invalidEvent, 'the event is not JSON-serializable', { subject: this.subject }, { cause: err });
    }
    const limit = this.maxEventBytes;
    if (data.length > limit) {
      throw new EventBusError(EventBusErrorCode.eventTooLarge, `event of ${data.length} bytes encoded exceeds the NATS connection's max_payload of ${limit} bytes`, { subject: this.subject, sizeBytes: data.length, limitBytes: limit });
    }
    // Checked before anything is delivered: an event goes everywhere it can, or nowhere.
    if (!this.#connected || this.#nc.isClosed()) {
      throw new EventBusError(EventBusErrorCode.unavailable, 'NATS is disconnected: the event was not published', { subject: this.subject });
    }
    try {
      this.#nc.publish(this.subject, data);
    } catch (err) {
      throw new EventBusError(EventBusErrorCode.unavailable, 'NATS refused the event', { subject: this.subject }, { cause: err });
    }
    this.#deliver(normalized);
  }

  subscribe(listener: (event: ServerEvent) => void): () => void {
    if (this.#closing !== undefined) throw new EventBusError(EventBusErrorCode.closed, 'the event bus is closed', { subject: this.subject });
    const entry: ListenerEntry = { listener };
    this.#listeners.add(entry);
    return () => void this.#listeners.delete(entry);
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#listeners.clear();
    // nats.js's status() is a QueuedIterator typed as a bare AsyncIterable; stop() takes it off the connection's listeners.
    (this.#status as { stop?: () => void }).stop?.();
    if (this.#nc.isClosed()) return;
    this.#sub.unsubscribe();
    if (this.#ownsConnection) {
      await this.#nc.close();
      return;
    }
    // The caller's connection stays open; wait until the server has the UNSUB.
    await this.#nc.flush().catch(() => undefined);
  }

  #received(data: Uint8Array): void {
    if (this.#closing !== undefined) return;
    const decoded = decodeEnvelope(data);
    if (!decoded.ok) {
      this.#report(new EventBusError(EventBusErrorCode.malformedEvent, `dropped a message on the bus subject: ${decoded.reason}`, { subject: this.subject, sizeBytes: data.length }));
      return;
    }
    // Our own: its listeners here were called when it was published.
    if (decoded.from === this.#id) return;
    this.#deliver(decoded.event);
  }

  /** Calls every listener in this process; one that throws does not stop the others (as the SDK's in-memory bus). */
  #deliver(event: ServerEvent): void {
    const outer = this.#dispatching;
    for (const entry of this.#listeners) {
      if (entry === outer) continue;
      this.#dispatching = entry;
      try {
        entry.listener(event);
      } catch (err) {
        this.#report(err instanceof Error ? err : new Error(String(err)));
      } finally {
        this.#dispatching = outer;
      }
    }
  }

  async #watchConnection(): Promise<void> {
    try {
      for await (const status of this.#status) {
        if (status.type === 'disconnect') {
          this.#connected = false;
        } else if (status.type === 'reconnect') {
          // nats.js has re-sent our SUB before it reports the reconnect.
          this.#connected = true;
          if (this.#resyncOnReconnect && this.#closing === undefined) for (const event of RESYNC_EVENTS) this.#deliver(event);
        }
      }
    } catch (err) {
      this.#report(err instanceof Error ? err : new Error(String(err)));
    }
  }

  #subscriptionFailed(err: Error): void {
    // A permissions violation, for one: this process hears nothing more on the bus.
    this.#report(new EventBusError(EventBusErrorCode.unavailable, 'the event bus subscription failed', { subject: this.subject }, { cause: err }));
  }

  #report(error: Error): void {
    try {
      this.#onerror?.(error);
    } catch {
      // A reporting callback must not break delivery.
    }
  }
}
