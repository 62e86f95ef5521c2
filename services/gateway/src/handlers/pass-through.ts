import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Caller } from '../auth/authenticator.js';
import type { GatewayContext } from '../context.js';
import type { Route } from '../config.js';
import { GatewayErrorCode, replyError } from '../http/reply.js';
import type { ErrorReply } from '../http/reply.js';
import { invalidToken } from '../auth/auth-error.js';
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
  const answer = await askUpstream(ctx, route, res, upstream, { method, headers: forwardHeaders(req, caller, undefined), ...(body === undefined ? {} : { body }) });
  if (answer === undefined) return;
  res.writeHead(answer.status, endToEndHeaders(answer.headers, tokenAuth(ctx)));
  for await (const chunk of answer.body) {
    // The client went away: leaving the loop closes the body (and its upstream connection).
    if (!res.write(chunk) && !(await drained(res))) return;
  }
  res.end();
}

/** Headers of one connection, not of the answer (Content-Length too: the pass-through streams chunked). */
const HOP_BY_HOP = ['content-length', 'transfer-encoding', 'connection', 'keep-alive'];

/**
 * Upstream headers a gateway that verifies tokens never relays: the
 * upstream's challenge would send the client to another authorization
 * server (or to none), and its cookies would land on the gateway's origin,
 * shared by every route behind it.
 */
const UPSTREAM_AUTH_HEADERS = ['www-authenticate', 'set-cookie'];

/** True when the gateway verifies tokens itself (`--auth jwt|introspect`): it, not the upstream, speaks for the protected resource. */
export const tokenAuth = (ctx: GatewayContext): boolean => ctx.config.auth.mode !== 'none';

/** An upstream answer's headers as the gateway relays them: all but those of its connection (and, with `tokenAuth`, its challenge and cookies). */
export function endToEndHeaders(upstream: Readonly<Record<string, string | string[] | undefined>>, tokenAuth: boolean): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value !== undefined && !HOP_BY_HOP.includes(name) && !(tokenAuth && UPSTREAM_AUTH_HEADERS.includes(name))) headers[name] = value;
  }
  return headers;
}

/**
 * An upstream's 401 when the gateway verifies tokens: the client's token
 * was good here, so the upstream's challenge is not passed on (it may name
 * another authorization server). With `--upstream-auth forward` the
 * upstream validated the same token and refused it: the client gets this
 * route's own challenge, and comes back with a fresh token from the right
 * issuer. With `strip` the upstream got no token at all, and with
 * `exchange` one the issuer minted for it: no token the client could get
 * would help, so it is the gateway's 502, naming the fix.
 * Undefined when the answer passes as it came.
 */
export function upstreamRefusedCaller(ctx: GatewayContext, route: Pick<Route, 'path'>, status: number): ErrorReply | undefined {
  if (status !== 401 || ctx.resourceMetadata === undefined || ctx.config.auth.mode === 'none') return undefined;
  const mode = ctx.config.auth.upstreamAuth[route.path];
  if (mode === 'forward') {
    return ctx.resourceMetadata.refusal(invalidToken('upstream_refused', 'the upstream refused the access token'), route.path);
  }
  if (mode === 'exchange') {
    return {
      status: 502,
      code: GatewayErrorCode.upstream,
      message: `the upstream of route ${route.path} answered 401 to the token exchanged for it: it must accept tokens from the issuer whose aud is the route's --upstream-audience`,
    };
  }
  return {
    status: 502,
    code: GatewayErrorCode.upstream,
    message: `the upstream of route ${route.path} answered 401: with --upstream-auth strip it gets no token, only Tether-Principal and Tether-Identity; give --upstream-auth ${route.path}=forward if it validates the route's tokens itself`,
  };
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

/**
 * A request sent upstream as the caller's. A transport failure, or the
 * upstream refusing the caller's credentials, is answered to the client here
 * (and the answer is `undefined`); otherwise the upstream's answer, unread.
 */
export async function askUpstream(ctx: GatewayContext, route: Route, res: ServerResponse, url: string, init: { method: 'POST' | 'GET' | 'DELETE'; headers: Record<string, string>; body?: Buffer }): Promise<UpstreamAnswer | undefined> {
  let answer: UpstreamAnswer;
  try {
    answer = await callUpstream(url, { ...init, errors: ctx.metrics.upstreamErrors });
  } catch (err) {
    replyError(res, upstreamFailure(err));
    return undefined;
  }
  const refused = upstreamRefusedCaller(ctx, route, answer.status);
  if (refused !== undefined) {
    await answer.cancel();
    replyError(res, refused);
    return undefined;
  }
  return answer;
}

/** 502 naming the upstream's failure (unreachable, reset), never its internals. */
export function upstreamFailure(err: unknown): ErrorReply {
  const message = err instanceof UpstreamError ? err.message : 'upstream request failed';
  return { status: 502, code: GatewayErrorCode.upstream, message };
}
