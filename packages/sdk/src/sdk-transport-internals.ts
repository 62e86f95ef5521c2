import { isJsonRpcId } from './json-rpc.js';
import type { JsonRpcId } from './json-rpc.js';

/**
 * The request ids the SDK's transport has mapped to one of its streams.
 *
 * Neither SDK tells an `EventStore` which requests a stream carries. Both
 * keep it in `_requestToStreamMapping` (a `Map<RequestId, streamId>`), and
 * both fill it for every request of a POST *before* they store the stream's
 * priming event: v1 1.32 `server/webStandardStreamableHttp.js`
 * `handlePostRequest` (the `_requestToStreamMapping.set` loop, then
 * `writePrimingEvent`), v2 2.4 `@modelcontextprotocol/server` the same
 * order in `handlePostRequest`. So when the store opens a stream, the map
 * names exactly its requests. It is a private field: if an SDK release
 * renames it this returns `undefined` and the store falls back to ending a
 * stream at its first response (`test/sdk-internals.test.ts` notices).
 */
export function requestsOfTransport(transport: object): (sdkStreamId: string) => readonly JsonRpcId[] | undefined {
  return (sdkStreamId) => {
    const mapping = (transport as { _requestToStreamMapping?: unknown })._requestToStreamMapping;
    if (!(mapping instanceof Map)) return undefined;
    const ids: JsonRpcId[] = [];
    for (const [id, stream] of mapping as Map<unknown, unknown>) if (stream === sdkStreamId && isJsonRpcId(id)) ids.push(id);
    return ids.length === 0 ? undefined : ids;
  };
}
