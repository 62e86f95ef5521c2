import type { ServerResponse } from 'node:http';
import { sendJson } from '../http/reply.js';
import type { RpcError } from './wire.js';

/** A JSON-RPC answer the gateway gives itself (a task method, a `CreateTaskResult`). */
export function replyResult(res: ServerResponse, id: unknown, result: unknown): void {
  sendJson(res, 200, { jsonrpc: '2.0', id, result });
}

/** A JSON-RPC error to request `id`; 400 for the codes 2026-07-28 answers at the HTTP level (-32020, -32021). */
export function replyRpcError(res: ServerResponse, id: unknown, error: RpcError, status = 200): void {
  sendJson(res, status, { jsonrpc: '2.0', id: id ?? null, error });
}
