import { preview } from './fuzz-kit.js';
import type { SeededSession, WireRequest, WireResponse } from './gateway-stack.js';

/** A header value as `fetch` puts it on the wire: leading and trailing HTTP whitespace removed. */
export function wireValue(value: string | undefined): string | undefined {
  return value?.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
}

/** The JSON-RPC error of a body, if it is one (`{ jsonrpc: '2.0', error: { code, message } }`). */
export function jsonRpcError(body: string): { code: number; message: string } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { jsonrpc, error } = value as { jsonrpc?: unknown; error?: { code?: unknown; message?: unknown } };
  if (jsonrpc !== '2.0' || typeof error !== 'object' || error === null) return undefined;
  if (!Number.isInteger(error.code) || typeof error.message !== 'string' || error.message.trim() === '') return undefined;
  return { code: error.code as number, message: error.message };
}

/**
 * The answer itself: no 5xx but a 502/503 whose JSON-RPC error names the
 * upstream or the session log as the cause; every 4xx carries a JSON-RPC
 * error with a message (HEAD answers have no body by HTTP's rules).
 */
export function answerProblems(req: WireRequest, res: WireResponse): string[] {
  const problems: string[] = [];
  const error = jsonRpcError(res.body);
  if (res.status >= 500) {
    const blamed = error !== undefined && /upstream|session log/i.test(error.message);
    if (!((res.status === 502 || res.status === 503) && blamed)) problems.push(`answered ${res.status}, not a 502/503 blaming the upstream or the session log`);
  }
  if (res.status >= 400 && res.status < 500 && req.method !== 'HEAD' && error === undefined) {
    problems.push(`answered ${res.status} without a JSON-RPC error body naming the problem`);
  }
  return problems;
}

/**
 * No event of another session: for every seeded session other than the one
 * the request names with its own principal, the answer (headers and body)
 * holds neither its payload marker, nor its epoch (the prefix of each of its
 * event ids), nor its session id unless the request itself sent it. The only
 * text removed before looking is the request's own `Last-Event-ID`, which a
 * refusal's `data.lastEventId` and a resume's priming event echo verbatim.
 */
export function leakProblems(req: WireRequest, res: WireResponse, named: SeededSession | undefined, seeded: readonly SeededSession[]): string[] {
  const problems: string[] = [];
  const sent = `${Object.values(req.headers).join('\n')}\n${req.body === undefined ? '' : Buffer.from(req.body).toString('latin1')}`;
  const lastEventId = wireValue(req.headers['last-event-id']);
  let answer = `${Object.entries(res.headers).map(([k, v]) => `${k}: ${v}`).join('\n')}\n${res.body}`;
  if (lastEventId !== undefined && lastEventId !== '') answer = answer.split(lastEventId).join('');
  const asOwner = named !== undefined && principalMatches(req);
  for (const s of seeded) {
    if (asOwner && s === named) continue;
    if (answer.includes(s.marker)) problems.push(`holds the payload marker ${s.marker} of session ${s.sessionId}`);
    if (answer.includes(s.epoch)) problems.push(`holds the epoch ${s.epoch} of session ${s.sessionId} (an event id of it?)`);
    if (answer.includes(s.sessionId) && !sent.includes(s.sessionId)) problems.push(`holds the session id ${s.sessionId}, which the request did not send`);
  }
  return problems;
}

/** Seeded sessions belong to the anonymous principal: a request is theirs unless it sends a non-empty `Authorization`. */
export function principalMatches(req: WireRequest): boolean {
  const auth = wireValue(req.headers['authorization']);
  return auth === undefined || auth === '';
}

/** A failure report: the request (its headers a record, or raw lines), the answer, what was wrong, and the gateway's recent warnings. */
export function report(title: string, req: Omit<WireRequest, 'headers'> & { readonly headers: unknown }, res: WireResponse | undefined, problems: readonly string[], logs: readonly string[]): string {
  const lines = [
    title,
    ...problems.map((p) => `  - ${p}`),
    `request: ${req.method} ${req.path}`,
    `  headers: ${preview(req.headers, 2_000)}`,
    `  body: ${req.body === undefined ? '(none)' : preview(Buffer.from(req.body).toString('utf8'), 600)}`,
  ];
  if (res !== undefined) {
    lines.push(`response: ${res.status} in ${Math.round(res.elapsedMs)} ms${res.cutOpen ? ' (SSE left open, cut)' : ''}`, `  headers: ${preview(res.headers, 600)}`, `  body: ${preview(res.body, 1_200)}`);
  }
  if (logs.length > 0) lines.push('gateway log (last warnings and errors):', ...logs.map((l) => `  ${l.slice(0, 600)}`));
  return lines.join('\n');
}
