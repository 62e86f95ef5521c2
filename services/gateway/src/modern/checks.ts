import type { IncomingMessage } from 'node:http';
import { HttpHeader } from '@tether/protocol';
import { header } from '../http/request.js';
import type { JsonRpcMessage } from '../http/request.js';
import { objectAt, RpcCode } from '../tasks/wire.js';
import type { RpcError } from '../tasks/wire.js';

/** The revisions of the stateless era the gateway serves itself (SEP-2575). A later date is -32022, never served as this one. */
export const SUPPORTED_MODERN_VERSIONS = ['2026-07-28'] as const;
/** The per-request envelope's protocol version (SEP-2575), which the `MCP-Protocol-Version` header must repeat. */
export const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';

/**
 * The body field each method's `Mcp-Name` header mirrors (SEP-2243, and
 * SEP-2663 "Routing Headers" for the task methods).
 */
const MCP_NAME_SOURCE: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
  // The draft SEP-2694 names its task as the task methods do.
  'tasks/stream': 'taskId',
};

/** An edge refusal: the JSON-RPC error and its HTTP status (always 400: SEP-2243's ladder). */
export interface EdgeRefusal {
  readonly error: RpcError;
  readonly status: 400;
}

/**
 * The checks a 2026-07-28 server makes before it answers a request, in the
 * order of the official SDK's inbound ladder (`@modelcontextprotocol/server`
 * 2.4, `classifyInboundRequest` and `validateStandardRequestHeaders`), for
 * the requests the gateway answers itself: a request that fails several is
 * answered by the first.
 *
 * 1. The envelope: `_meta["io.modelcontextprotocol/protocolVersion"]`
 *    present (-32602, naming the key), and equal to the header (-32020).
 * 2. A revision the gateway serves (-32022, naming the supported ones).
 * 3. `Mcp-Method` present and equal to the body's method (-32020).
 * 4. `Mcp-Name`, where the method has one: present when the body has the
 *    field, its `=?base64?…?=` form decoded, equal to the field (-32020).
 *
 * Header values are compared without the whitespace HTTP allows around a
 * field value (RFC 9110 section 5.5). Undefined: every check passed.
 */
export function checkModernRequest(req: IncomingMessage, message: JsonRpcMessage): EdgeRefusal | undefined {
  const method = message.method as string;
  const params = objectAt(message, 'params');
  const headerVersion = fieldValue(header(req, HttpHeader.protocolVersion));
  const claimed = objectAt(params, '_meta')?.[PROTOCOL_VERSION_META];
  if (typeof claimed !== 'string') {
    const missing = objectAt(params, '_meta') === undefined ? '_meta' : PROTOCOL_VERSION_META;
    return refuse(RpcCode.invalidParams, `Invalid params: the MCP-Protocol-Version header names protocol revision ${headerVersion ?? '(none)'}, but the request is missing the required per-request envelope key(s): ${missing}`, { envelope: { missing: [missing] } });
  }
  if (headerVersion !== claimed) {
    return mismatch('MCP-Protocol-Version', `the body envelope names protocol version ${claimed.slice(0, 32)} but the MCP-Protocol-Version header names ${headerVersion === undefined ? 'nothing' : headerVersion.slice(0, 32)}`);
  }
  if (!(SUPPORTED_MODERN_VERSIONS as readonly string[]).includes(claimed)) {
    return refuse(RpcCode.unsupportedVersion, `Unsupported protocol version: ${claimed.slice(0, 32)} (supported: ${SUPPORTED_MODERN_VERSIONS.join(', ')})`, { supported: [...SUPPORTED_MODERN_VERSIONS], requested: claimed.slice(0, 32) });
  }
  const sentMethod = fieldValue(header(req, 'mcp-method'));
  if (sentMethod === undefined) return mismatch('Mcp-Method', `the body names method ${method.slice(0, 64)} but the required Mcp-Method header is absent`);
  if (sentMethod !== method) return mismatch('Mcp-Method', `the Mcp-Method header does not name the body's method ${method.slice(0, 64)}`);
  const field = MCP_NAME_SOURCE[method];
  if (field === undefined) return undefined;
  const bodyValue = typeof params?.[field] === 'string' ? (params[field] as string) : undefined;
  const sentName = fieldValue(header(req, 'mcp-name'));
  if (sentName === undefined) {
    return bodyValue === undefined ? undefined : mismatch('Mcp-Name', `the body carries params.${field} but the required Mcp-Name header is absent`);
  }
  const decoded = decodeHeaderValue(sentName);
  if (decoded === undefined) return mismatch('Mcp-Name', 'the Mcp-Name header carries an invalid Base64 sentinel value');
  // Neither value is echoed: a task id is its holder's bearer handle, and answers never repeat one.
  if (bodyValue !== undefined && decoded !== bodyValue) return mismatch('Mcp-Name', `the Mcp-Name header does not name params.${field}`);
  return undefined;
}

const BASE64_PREFIX = '=?base64?';
const BASE64_SUFFIX = '?=';
/** Canonical base64 (RFC 4648 section 4, padded): anything else is an invalid sentinel, not a second spelling. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * A header value as SEP-2243 carries it: as is, or `=?base64?<b64>?=` for a
 * value a header cannot hold (non-ASCII, control characters). Undefined for
 * a sentinel whose payload is not canonical base64 of UTF-8.
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (!(value.startsWith(BASE64_PREFIX) && value.endsWith(BASE64_SUFFIX) && value.length >= BASE64_PREFIX.length + BASE64_SUFFIX.length)) return value;
  const b64 = value.slice(BASE64_PREFIX.length, value.length - BASE64_SUFFIX.length);
  if (!BASE64.test(b64)) return undefined;
  const bytes = Buffer.from(b64, 'base64');
  const text = bytes.toString('utf8');
  // A lone surrogate or invalid sequence decodes to U+FFFD: not the bytes that were sent.
  return Buffer.from(text, 'utf8').equals(bytes) ? text : undefined;
}

/** A header's value without the optional whitespace HTTP allows around it (spaces and tabs only). */
export const fieldValue = (value: string | undefined): string | undefined => value?.replace(/^[ \t]+|[ \t]+$/g, '');

/** -32020 naming the header that disagrees (never its value, which may be a task id). */
function mismatch(headerName: string, body: string): EdgeRefusal {
  return refuse(RpcCode.headerMismatch, `Bad Request: the request headers and body disagree: ${body}`, { mismatch: { header: headerName, body } });
}

function refuse(code: number, message: string, data: unknown): EdgeRefusal {
  return { error: { code, message, data }, status: 400 };
}
