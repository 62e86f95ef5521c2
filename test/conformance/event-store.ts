import type { EventId, EventStore, StreamId } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * An in-memory `EventStore` that replays in the order events were stored.
 *
 * Not the SDK's example store: that one orders replay by sorting ids built
 * from `Date.now()` and a random suffix, so two events stored in the same
 * millisecond can replay swapped, and the conformance results would depend on
 * timing. Ids here are `<streamId>.<n>` with one counter per store, and each
 * stream keeps its events in an array, so replay is the exact suffix.
 */
export class OrderedEventStore implements EventStore {
  readonly #streams = new Map<StreamId, { readonly id: EventId; readonly message: JSONRPCMessage }[]>();
  readonly #streamOf = new Map<EventId, StreamId>();
  #next = 0;

  storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    this.#next += 1;
    const id = `${streamId}.${this.#next}`;
    let events = this.#streams.get(streamId);
    if (events === undefined) {
      events = [];
      this.#streams.set(streamId, events);
    }
    events.push({ id, message });
    this.#streamOf.set(id, streamId);
    return Promise.resolve(id);
  }

  getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return Promise.resolve(this.#streamOf.get(eventId));
  }

  async replayEventsAfter(lastEventId: EventId, { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> }): Promise<StreamId> {
    const streamId = this.#streamOf.get(lastEventId);
    if (streamId === undefined) throw new Error(`unknown event id ${JSON.stringify(lastEventId)}`);
    const events = this.#streams.get(streamId) ?? [];
    const from = events.findIndex((e) => e.id === lastEventId) + 1;
    for (const event of events.slice(from)) {
      // Priming events are stored as `{}` to reserve an id; there is nothing to resend.
      if (Object.keys(event.message).length > 0) await send(event.id, event.message);
    }
    return streamId;
  }
}
