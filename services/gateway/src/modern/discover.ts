import type { IncomingMessage, ServerResponse } from 'node:http';
import { SseParser } from '@tether/protocol';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { endToEndHeaders, tokenAuth, upstreamFailure } from '../handlers/pass-through.js';
import { replyError } from '../http/reply.js';
import { callUpstream, forwardHeaders, isEventStream, isIdentity } from '../upstream.js';
import type { UpstreamAnswer } from '../upstream.js';
import { resultOf } from '../tasks/task-owners.js';
import { TASKS_EXTENSION } from '../tasks/wire.js';

/**
 * `server/discover` goes to the upstream as any request; the gateway adds
 * `io.modelcontextprotocol/tasks` to `capabilities.extensions` of the answer
 * (it serves the extension whatever the upstream does) and removes a
 * 2025-era `capabilities.tasks` (SEP-2663: the extension replaces it, and it
 * MUST NOT be advertised), changing nothing else. An answer it cannot read
 * (an error, an encoded body) goes back as is.
 */
export async function handleDiscover(ctx: GatewayContext, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, learn?: (result: unknown) => void): Promise<void> {
  let answer: UpstreamAnswer;
  try {
    answer = await callUpstream(ctx.pickers.get(route.path)!.pick(), { method: 'POST', headers: forwardHeaders(req, caller, undefined), body, errors: ctx.metrics.upstreamErrors });
  } catch (err) {
    return replyError(res, upstreamFailure(err));
  }
  const bytes = await answer.bytes();
  const readable = answer.status === 200 && isIdentity(answer);
  // The answer as the upstream gave it says whether it runs tasks itself (tasks/task-owners.ts): learned before the extension is added.
  if (readable && learn !== undefined) learn(resultOf(bytes.toString('utf8'), isEventStream(answer)));
  const out = !readable ? bytes : isEventStream(answer) ? withExtensionInEvents(bytes) : (withExtension(bytes.toString('utf8')) ?? bytes);
  const headers = endToEndHeaders(answer.headers, tokenAuth(ctx));
  headers['content-length'] = String(Buffer.byteLength(out));
  res.writeHead(answer.status, headers);
  res.end(out);
}

/** The JSON text with the extension added to a result's capabilities, or undefined if it has none. */
function withExtension(text: string): string | undefined {
  let message: { result?: { capabilities?: Record<string, unknown> } };
  try {
    message = JSON.parse(text) as typeof message;
  } catch {
    return undefined;
  }
  const capabilities = message?.result?.capabilities;
  if (typeof capabilities !== 'object' || capabilities === null) return undefined;
  const extensions = typeof capabilities.extensions === 'object' && capabilities.extensions !== null ? (capabilities.extensions as Record<string, unknown>) : {};
  capabilities.extensions = { ...extensions, [TASKS_EXTENSION]: extensions[TASKS_EXTENSION] ?? {} };
  delete capabilities.tasks;
  return JSON.stringify(message);
}

/** The same inside an event stream: each event rewritten with its id and type, its data changed only where it is the answer. */
function withExtensionInEvents(bytes: Buffer): string {
  const parser = new SseParser();
  const events = [...parser.push(bytes), ...parser.end()];
  let out = '';
  for (const event of events) {
    if (event.id !== undefined) out += `id: ${event.id}\n`;
    if (event.event !== undefined) out += `event: ${event.event}\n`;
    if (event.retryMs !== undefined) out += `retry: ${event.retryMs}\n`;
    if (event.hasData) for (const line of (withExtension(event.data) ?? event.data).split('\n')) out += `data: ${line}\n`;
    out += '\n';
  }
  return out;
}
