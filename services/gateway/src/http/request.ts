import type { IncomingMessage } from 'node:http';
import type { ErrorReply } from './reply.js';
import { GatewayErrorCode } from './reply.js';

/** First value of a header (Node joins repeated ones; arrays only for set-cookie). */
export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/**
 * DNS-rebinding protection (MCP transport spec): a browser request carries
 * `Origin`; only loopback origins and configured ones are accepted. Requests
 * without `Origin` (non-browser clients) pass.
 */
export function originAllowed(req: IncomingMessage, allowed: readonly string[]): boolean {
  const origin = header(req, 'origin');
  if (origin === undefined || allowed.includes('*') || allowed.includes(origin)) return true;
  try {
    return LOOPBACK.has(new URL(origin).hostname);
  } catch {
    return false;
  }
}

export class BodyError extends Error {
  constructor(readonly reply: ErrorReply) {
    super(reply.message);
  }
}

/** How long a refused body may keep arriving (discarded) before its connection is closed. */
const LINGER_MS = 5_000;

/**
 * Reads the whole body, refusing past `maxBytes` without buffering more
 * (413). On the stream's events, not its async iterator (a few objects and
 * promises per chunk, for what is nearly always one small chunk).
 *
 * A refused body is drained, not cut: closing the socket while the client (or
 * a proxy in front) is still sending resets the connection, and the 413 is
 * lost to a reset or a proxy's 502. The rest is discarded for up to
 * LINGER_MS, then the connection is closed (a lingering close, as nginx does).
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(header(req, 'content-length') ?? Number.NaN);
  if (declared > maxBytes) {
    discardRest(req);
    return Promise.reject(new BodyError(tooLarge(declared, maxBytes)));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) {
        done();
        discardRest(req);
        reject(new BodyError(tooLarge(size, maxBytes)));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      done();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      done();
      reject(err);
    };
    // The client went away before the body ended (no 'end', maybe no 'error').
    const onClose = (): void => {
      done();
      reject(new Error('the request closed before its body ended'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function discardRest(req: IncomingMessage): void {
  if (req.complete) return;
  const timer = setTimeout(() => req.destroy(), LINGER_MS);
  timer.unref();
  req.once('end', () => clearTimeout(timer));
  req.once('close', () => clearTimeout(timer));
  req.resume();
}

function tooLarge(size: number, maxBytes: number): ErrorReply {
  return { status: 413, code: GatewayErrorCode.tooLarge, message: `request body of ${size} bytes exceeds the limit of ${maxBytes} bytes` };
}

/** The JSON-RPC messages of a POST body, or a reply naming what is wrong with it. */
export type JsonRpcMessage = { jsonrpc?: unknown; id?: unknown; method?: unknown; result?: unknown; error?: unknown; params?: unknown };

export function parseMessages(body: Buffer): { ok: true; messages: JsonRpcMessage[] } | { ok: false; reply: ErrorReply } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (err) {
    return { ok: false, reply: { status: 400, code: GatewayErrorCode.parse, message: `Parse error: the body is not valid JSON (${(err as Error).message})` } };
  }
  const messages = Array.isArray(value) ? value : [value];
  if (messages.length === 0 || !messages.every((m) => typeof m === 'object' && m !== null && (m as JsonRpcMessage).jsonrpc === '2.0')) {
    return { ok: false, reply: { status: 400, code: GatewayErrorCode.invalidRequest, message: 'Invalid Request: the body must be a JSON-RPC 2.0 message or a non-empty batch of them' } };
  }
  return { ok: true, messages: messages as JsonRpcMessage[] };
}

export const isRequest = (m: JsonRpcMessage): boolean => typeof m.method === 'string' && m.id !== undefined && m.id !== null;
export const isInitialize = (m: JsonRpcMessage): boolean => m.method === 'initialize' && isRequest(m);
export const isResponse = (m: JsonRpcMessage): boolean => m.method === undefined && m.id !== undefined && (m.result !== undefined || m.error !== undefined);
