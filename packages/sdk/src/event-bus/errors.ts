/**
 * Local errors of the NATS `ServerEventBus`. Callers match on `code`. No
 * message or field ever carries an event's content (a resource URI can name
 * a user's file): sizes and limits only.
 */
export const EventBusErrorCode = {
  /** An option is missing, malformed or out of range; `fields.detail.key` names it. */
  invalidConfig: 'invalid_config',
  /** `publish` was given something that is not one of the SDK's four `ServerEvent` kinds. */
  invalidEvent: 'invalid_event',
  /** The encoded event is larger than the connection's `max_payload`: it was sent nowhere. */
  eventTooLarge: 'event_too_large',
  /** NATS is disconnected (or the connection is closed): the event was sent nowhere, not even to this process's listeners. */
  unavailable: 'bus_unavailable',
  /** `publish` or `subscribe` after `close()`. */
  closed: 'bus_closed',
  /** A message on the bus subject that is not an event of this bus (reported to `onerror`, then dropped). */
  malformedEvent: 'malformed_event',
} as const;
export type EventBusErrorCode = (typeof EventBusErrorCode)[keyof typeof EventBusErrorCode];

/** Facts that travel with an error (never the event itself). */
export interface EventBusErrorFields {
  /** The bus subject. */
  readonly subject?: string;
  readonly sizeBytes?: number;
  readonly limitBytes?: number;
  readonly detail?: Readonly<Record<string, unknown>>;
}

export class EventBusError extends Error {
  override readonly name = 'EventBusError';
  readonly code: EventBusErrorCode;
  readonly fields: EventBusErrorFields;

  constructor(code: EventBusErrorCode, message: string, fields: EventBusErrorFields = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.fields = fields;
  }
}

export function isEventBusError(err: unknown, code?: EventBusErrorCode): err is EventBusError {
  return err instanceof EventBusError && (code === undefined || err.code === code);
}
