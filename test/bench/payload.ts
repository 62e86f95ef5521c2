import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Size of every benchmark event: a typical MCP progress notification. */
export const PAYLOAD_BYTES = 200;

const FILLER = 'indexing workspace files and embedding chunks for retrieval; this may take a while on large repositories ';
const encoder = new TextEncoder();

/**
 * A `notifications/progress` JSON-RPC message whose JSON text is exactly
 * PAYLOAD_BYTES long (the message text is padded to fit).
 */
export function progressMessage(token: string, progress: number): JSONRPCMessage {
  const build = (message: string): JSONRPCMessage => ({
    jsonrpc: '2.0',
    method: 'notifications/progress',
    params: { progressToken: token, progress, total: 100_000, message },
  });
  const bare = JSON.stringify(build('')).length;
  return build(FILLER.repeat(3).slice(0, Math.max(0, PAYLOAD_BYTES - bare)));
}

/** The same message as the bytes a gateway would log. */
export function progressPayload(token: string, progress: number): Uint8Array {
  return encoder.encode(JSON.stringify(progressMessage(token, progress)));
}
