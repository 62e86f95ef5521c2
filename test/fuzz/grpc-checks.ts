import { status } from '@grpc/grpc-js';
import { errorDetailOf, resumeVerdictSpelling } from '@tether/cursor-proto';
import type { ErrorDetail, RpcStatus } from '@tether/cursor-proto';
import { GRPC_STATUS_OF_CODE, GRPC_STATUS_OF_VERDICT } from '@tether/session-log-service';
import { preview } from './fuzz-kit.js';
import type { CallOutcome, GrpcStack, RpcName, SeededLog } from './grpc-stack.js';

/**
 * The expected status of a refusal's verdict (a proto enum number): the
 * service's RESUME table, by the verdict's spelling. Undefined for RESUMED,
 * UNSPECIFIED or a number the proto does not define.
 *
 * The fuzz suite checks the wire against the service's own tables
 * (GRPC_STATUS_OF_CODE and GRPC_STATUS_OF_VERDICT); the tables themselves
 * are pinned to cursor.proto, entry by entry, by
 * services/session-log/test/errors.test.ts.
 */
function statusOfVerdict(verdict: number): status | undefined {
  const spelling = resumeVerdictSpelling(verdict);
  return spelling === undefined || spelling === 'resumed' ? undefined : GRPC_STATUS_OF_VERDICT[spelling];
}

/**
 * Client errors: what a fuzzed request may get. UNAVAILABLE only when the
 * detail blames the log (`log_unavailable`). INTERNAL, UNKNOWN, DATA_LOSS,
 * UNIMPLEMENTED and the rest are server errors: the gRPC side of a 5xx.
 */
const CLIENT_STATUSES = new Set<status>([
  status.INVALID_ARGUMENT,
  status.NOT_FOUND,
  status.FAILED_PRECONDITION,
  status.ABORTED,
  status.OUT_OF_RANGE,
  status.RESOURCE_EXHAUSTED,
  status.UNAUTHENTICATED,
]);

export const statusName = (code: number): string => `${status[code] ?? 'UNKNOWN_CODE'}(${code})`;

/**
 * A failed call (or batch entry) that keeps the ERRORS contract: an
 * ErrorDetail in `grpc-status-details-bin` whose code goes with the status
 * (cursor.proto's tables), and never `too_many_streams` (the suite holds at
 * most one stream open).
 */
export function detailProblems(code: number, message: string, detail: ErrorDetail | undefined, where = 'the call'): string[] {
  const problems: string[] = [];
  if (detail === undefined || detail.code === '') return [`${where} ended ${statusName(code)} "${message}" without an ErrorDetail (that the generated stubs decode) in grpc-status-details-bin`];
  const expected = detail.code === 'resume_refused' ? statusOfVerdict(detail.verdict) : GRPC_STATUS_OF_CODE[detail.code];
  if (expected === undefined) problems.push(`${where}: ErrorDetail.code ${JSON.stringify(detail.code)} (verdict ${detail.verdict}) is not in cursor.proto's tables`);
  else if (expected !== code) problems.push(`${where}: ErrorDetail.code ${detail.code} goes with ${statusName(expected)}, but the status is ${statusName(code)}`);
  if (detail.code === 'too_many_streams') problems.push(`${where}: too_many_streams although the suite holds at most one stream open: a cancelled stream was not released`);
  return problems;
}

/** A failed call whose status is a server error (the gRPC side of a 5xx) though nothing was wrong with the log. */
export function serverErrorProblems(code: number, message: string, detail: ErrorDetail | undefined, where = 'the call'): string[] {
  const blamesLog = code === status.UNAVAILABLE && detail?.code === 'log_unavailable';
  if (CLIENT_STATUSES.has(code) || blamesLog) return [];
  return [`${where} ended ${statusName(code)} "${message}"${detail === undefined ? '' : ` (${detail.code})`}: a server error not caused by the log, for a client's input`];
}

/** Both of the above. */
export function failureProblems(code: number, message: string, detail: ErrorDetail | undefined, where = 'the call'): string[] {
  return [...serverErrorProblems(code, message, detail, where), ...detailProblems(code, message, detail, where)];
}

/** The answer as text (payload bytes as UTF-8), for looking for what must not be there; plus decode problems. */
export function answerText(stack: GrpcStack, rpc: RpcName, outcome: CallOutcome): { text: string; problems: string[]; decoded: unknown[] } {
  const problems: string[] = [];
  const decoded: unknown[] = [];
  for (const m of outcome.messages) {
    try {
      decoded.push(stack.decode(rpc, m));
    } catch (err) {
      problems.push(`a ${rpc} response message does not decode: ${(err as Error).message}`);
    }
  }
  let text = decoded.map((d) => JSON.stringify(textual(d))).join('\n');
  if (outcome.t === 'failed') text += `\n${outcome.failure.message}\n${JSON.stringify(textual(outcome.failure.detail))}`;
  return { text, problems, decoded };
}

function textual(value: unknown): unknown {
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8');
  if (Array.isArray(value)) return value.map(textual);
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, textual(v)]));
  return value;
}

/**
 * Everything wrong with an outcome, leaks aside: no answer in time, or a
 * failure (of the call or of a batch entry) that `judge` finds wrong.
 */
export function outcomeProblems(rpc: RpcName, outcome: CallOutcome, decoded: readonly unknown[], judge: typeof failureProblems): string[] {
  if (outcome.t === 'no-answer') return [`no answer: ${outcome.why}`];
  if (outcome.t === 'failed') return judge(outcome.failure.code, outcome.failure.message, outcome.failure.detail);
  const problems: string[] = [];
  if (rpc === 'appendBatch') {
    for (const [i, result] of ((decoded[0] as { results?: { error?: RpcStatus }[] } | undefined)?.results ?? []).entries()) {
      if (result.error !== undefined) problems.push(...judge(result.error.code, result.error.message, errorDetailOf(result.error), `entry ${i}`));
    }
  }
  return problems;
}

/**
 * No other session's data: for every seeded session not `owned` by this
 * request, the answer holds neither its payload marker, nor its epoch (every
 * event id of it starts with it), nor its id unless the request sent it. The
 * request's own `Last-Event-ID` is removed first (a refusal's detail echoes
 * it as `cursor`).
 */
export function leakProblems(answer: string, sent: string, lastEventId: string | undefined, owned: readonly SeededLog[], seeded: readonly SeededLog[]): string[] {
  const problems: string[] = [];
  const text = lastEventId === undefined || lastEventId === '' ? answer : answer.split(lastEventId).join('');
  for (const s of seeded) {
    if (owned.includes(s)) continue;
    if (text.includes(s.marker)) problems.push(`holds the payload marker ${s.marker} of session ${s.sessionId}`);
    if (text.includes(s.epoch)) problems.push(`holds the epoch ${s.epoch} of session ${s.sessionId} (an event id of it?)`);
    if (text.includes(s.sessionId) && !sent.includes(s.sessionId)) problems.push(`holds the session id ${s.sessionId}, which the request did not send`);
  }
  return problems;
}

export function report(title: string, rpc: RpcName, caller: string, request: unknown, outcome: CallOutcome, answer: string, problems: readonly string[], logs: readonly string[]): string {
  const lines = [title, ...problems.map((p) => `  - ${p}`), `request: ${rpc} as ${caller}: ${preview(request, 1_500)}`];
  if (outcome.t === 'failed') lines.push(`status: ${statusName(outcome.failure.code)} ${JSON.stringify(outcome.failure.message)} detail ${preview(outcome.failure.detail, 600)}`);
  else lines.push(`outcome: ${outcome.t}${outcome.t === 'ok' && outcome.cut ? ' (stream cut by us)' : ''}`);
  lines.push(`answer (${outcome.messages.length} messages): ${preview(answer, 1_200)}`);
  if (logs.length > 0) lines.push('service log (last warnings and errors):', ...logs.map((l) => `  ${l.slice(0, 600)}`));
  return lines.join('\n');
}
