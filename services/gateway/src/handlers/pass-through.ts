import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Caller } from '../auth/authenticator.js';
import type { GatewayContext } from '../context.js';
import type { Route } from '../config.js';
import { GatewayErrorCode, replyError } from '../http/reply.js';
import type { ErrorReply } from '../http/reply.js';
import { callUpstream, forwardHeaders, UpstreamError } from '../upstream.js';
import type { UpstreamAnswer } from '../upstream.js';

/**
 * A request that names no session: the stateless era (2026-07-28), or a
 * client's mistake. Either way the upstream decides, and its answer goes
 * back untouched (no session, no log): a modern-only upstream's 405 to a GET
 * or DELETE, its -32020/-32022 refusals, its JSON or SSE answers. Only the
 * caller's identity was checked here (`--auth`).
 */
export async function passThrough(ctx: GatewayContext, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, method: 'POST' | 'GET' | 'DELETE', body?: Buffer): Promise<void> {
  const upstream = ctx.pickers.get(route.path)!.pick();
  let answer: UpstreamAnswer;
  try {
    answer = await callUpstream(upstream, { method, headers: forwardHeaders(req, caller, undefined), ...(body === undefined ? {} : { body }), errors: ctx.metrics.upstreamErrors });
  } catch (err) {
    return replyError(res, upstreamFailure(err));
  }
  res.writeHead(answer.status, endToEndHeaders(answer.headers));
  for await (const chunk of answer.body) {
    // The client went away: leaving the loop closes the body (and its upstream connection).
    if (!res.write(chunk) && !(await drained(res))) return;
  }
  res.end();
}

/** Headers of one connection, not of the answer (Content-Length too: the pass-through streams chunked). */
const HOP_BY_HOP = ['content-length', 'transfer-encoding', 'connection', 'keep-alive'];

/** An upstream answer's headers as the gateway relays them: all but those of its connection. */
export function endToEndHeaders(upstream: Readonly<Record<string, string | string[] | undefined>>): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value !== undefined && !HOP_BY_HOP.includes(name)) headers[name] = value;
  }
  return headers;
}

/** True once `res` can take writes again; false when it closed first (the client is gone). */
function drained(res: ServerResponse): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

/** 502 naming the upstream's failure (unreachable, reset), never its internals. */
export function upstreamFailure(err: unknown): ErrorReply {
  const message = err instanceof UpstreamError ? err.message : 'upstream request failed';
  return { status: 502, code: GatewayErrorCode.upstream, message };
}
