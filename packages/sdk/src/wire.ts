/**
 * Names and codes this package puts on the wire or in the registry, in one
 * place (STYLE: constants per package in `wire.ts`).
 */

/** The SDK's stream id for the standalone GET stream (both SDKs hard-code it: `_standaloneSseStreamId`). */
export const SDK_GET_STREAM = '_GET_stream';

/** Session record metadata written by `createSessionRouter`. */
export const SessionMeta = {
  /** The client's `initialize` params (JSON): how another instance rebuilds the server state. */
  initialize: 'sdk.initialize',
  /** Marks a session as made by this package, so the gateway's records are never taken for ours. */
  owner: 'sdk.owner',
} as const;

/** The value of `SessionMeta.owner`. */
export const SESSION_OWNER = 'tether-sdk';

/**
 * JSON-RPC error codes we answer with. -32001 is what both SDKs answer for
 * an unknown session; -32000 is their transport error.
 */
export const JsonRpcCode = {
  transport: -32000,
  sessionNotFound: -32001,
  resumeRefused: -32001,
  /** A stream's producing instance stopped before it answered: the request's outcome is unknown. */
  writerLost: -32003,
  unavailable: -32004,
  parse: -32700,
} as const;
