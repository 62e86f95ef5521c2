/**
 * What the event bus puts on NATS, in one place (STYLE: constants per
 * package in `wire.ts`).
 */

/** Subject kind token beside the log's `log`, `live`, `ctl`, `writer`: `<prefix>.bus.<channel>`. */
export const BUS_TOKEN = 'bus';

/** The channel of a bus created without one. */
export const DEFAULT_BUS_CHANNEL = 'default';

/** One subject token: a channel never adds a level, so `<prefix>.bus.*` matches every channel of a namespace. */
export const BUS_CHANNEL_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Bumped when the envelope changes incompatibly; a receiver drops (and reports) a version it does not know. */
export const BUS_ENVELOPE_VERSION = 1;

/** `<prefix>.bus.<channel>`: every instance of one MCP server publishes and subscribes here. */
export function busSubject(subjectPrefix: string, channel: string): string {
  return `${subjectPrefix}.${BUS_TOKEN}.${channel}`;
}

/**
 * The JSON body of one bus message. `from` is the publishing bus's id: the
 * publisher has already delivered the event to its own listeners, so it
 * skips its own message when NATS echoes it back.
 */
export interface BusEnvelope {
  readonly v: typeof BUS_ENVELOPE_VERSION;
  readonly from: string;
  readonly event: unknown;
}
