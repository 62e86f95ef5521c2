import { isJsonRpcId } from './json-rpc.js';
import type { JsonRpcId } from './json-rpc.js';

/**
 * The payload of a POST stream's opening `prime` (never sent to clients):
 * the JSON-RPC request ids the stream owes. An instance that finds the
 * stream's writer gone answers exactly those still unanswered with an error
 * (design.md, "Every stream opens with a prime event"). `requests` is
 * absent when the store was not told which requests a stream carries.
 */
export interface StreamOpening {
  readonly requests?: readonly JsonRpcId[];
}

export function encodeOpening(requests: readonly JsonRpcId[] | undefined): Uint8Array {
  return Buffer.from(JSON.stringify(requests === undefined ? {} : { requests }), 'utf8');
}

/** The requests an opening names; `undefined` when it names none or cannot be read. */
export function decodeOpening(payload: Uint8Array): readonly JsonRpcId[] | undefined {
  try {
    const value = JSON.parse(Buffer.from(payload).toString('utf8')) as StreamOpening;
    return Array.isArray(value.requests) ? value.requests.filter(isJsonRpcId) : undefined;
  } catch {
    return undefined;
  }
}
