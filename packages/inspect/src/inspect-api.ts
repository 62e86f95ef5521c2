/**
 * The JSON API behind the page: read-only, sessions named by tag only.
 *
 *   GET /api/sessions?verdict=V&principal=P&limit=N
 *                                         → { sessions: SessionSummary[], verdicts: string[] }
 *   GET /api/sessions/<tag>               → SessionTimeline, or 404
 *   GET /api/sessions/<tag>/chains        → { checks: ChainCheck[] }, or 404
 *   GET /api/tasks?status=S&principal=P&limit=N
 *                                         → TaskList (the gateways' durable tasks, by tag)
 *
 * A path segment must look like a tag (`s_` and 12 base64url characters);
 * anything else, a raw session id included, is refused with 400 before the
 * source is asked, so the API can never be used to look a session up by id.
 * A session's principal is its tag (12 characters of the digest); `principal`
 * lists the sessions whose principal tag starts with P (1 to 43 base64url
 * characters, the first 12 compared), asked of the source, so the list is
 * that principal's most recent `limit` sessions.
 *
 * Tasks are only listed: no path takes a task id or tag, so a task id (a
 * bearer handle) never travels in an inspector URL. Through an operator API
 * (`--log grpc://`), which has no task calls, `/api/tasks` answers 501.
 */
import type { ChainCheck, SessionSummary, SessionTimeline } from './model.js';
import type { SessionFilter } from './sessions.js';
import { isPrincipalFilter, PRINCIPAL_FILTER_ALLOWED, TAG_PATTERN } from './tag.js';
import { TASK_STATUSES } from './task-statuses.js';
import type { TaskFilter, TaskList } from './task-model.js';
import { isTaskStatusName } from './task-view.js';

/**
 * Where the inspector reads from: the read model over the log
 * (`createLogReadModel`), or fixture data in tests. `readTimeline` answers
 * undefined for an unknown tag; `checkChains` throws an error whose `code` is
 * `session_not_found` for one.
 */
export interface InspectSource {
  listSessions(filter: SessionFilter): Promise<SessionSummary[]>;
  readTimeline(tag: string): Promise<SessionTimeline | undefined>;
  checkChains(tag: string): Promise<ChainCheck[]>;
  /** Throws an error whose `code` is `unsupported` where tasks cannot be read (the operator API). */
  listTasks(filter: TaskFilter): Promise<TaskList>;
}

export interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
}

const VERDICT_PATTERN = /^[a-z_]{1,32}$/;
const DEFAULT_LIMIT = 200;
const MAX_LIMIT = 1000;

const codeOf = (err: unknown): unknown => (typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined);

/** `?limit=`, default 200; undefined when it is not an integer from 1 to 1000. */
function limitOf(query: URLSearchParams): number | undefined {
  const text = query.get('limit') ?? '';
  const limit = text === '' ? DEFAULT_LIMIT : Number(text);
  return Number.isInteger(limit) && limit >= 1 && limit <= MAX_LIMIT ? limit : undefined;
}

const error = (status: number, code: string, message: string): ApiAnswer => ({ status, body: { error: { code, message } } });

/**
 * Answers one API request (`path` without the query, `query` parsed).
 * Errors of the source are the caller's to log; they become 500 there.
 */
export async function answerApi(source: InspectSource, path: string, query: URLSearchParams): Promise<ApiAnswer> {
  const parts = path.split('/').filter((p) => p !== '');
  if (parts[0] === 'api' && parts[1] === 'tasks') return answerTasks(source, parts, query);
  if (parts[0] !== 'api' || parts[1] !== 'sessions') return error(404, 'not_found', 'no such API path');
  if (parts.length === 2) {
    const verdict = query.get('verdict') ?? '';
    if (verdict !== '' && !VERDICT_PATTERN.test(verdict)) return error(400, 'bad_request', 'verdict: lower-case letters and _');
    const principal = query.get('principal') ?? '';
    if (principal !== '' && !isPrincipalFilter(principal)) return error(400, 'bad_request', `principal: ${PRINCIPAL_FILTER_ALLOWED}`);
    const limit = limitOf(query);
    if (limit === undefined) return error(400, 'bad_request', `limit: an integer from 1 to ${MAX_LIMIT}`);
    // The filter's kinds come from everything listed, so the page offers only verdicts that occur.
    const all = await source.listSessions({ limit, ...(principal === '' ? {} : { principal }) });
    const verdicts = [...new Set(all.flatMap((s) => Object.keys(s.verdicts)))].sort();
    const sessions = verdict === '' ? all : all.filter((s) => (s.verdicts[verdict] ?? 0) > 0);
    return { status: 200, body: { sessions, verdicts } };
  }
  const tag = parts[2]!;
  if (!TAG_PATTERN.test(tag)) return error(400, 'bad_request', 'sessions are named by tag (s_ and 12 characters), never by id');
  if (parts.length === 3) {
    const timeline = await source.readTimeline(tag);
    return timeline === undefined ? error(404, 'unknown_session', 'no session with this tag') : { status: 200, body: timeline };
  }
  if (parts.length === 4 && parts[3] === 'chains') {
    try {
      return { status: 200, body: { checks: await source.checkChains(tag) } };
    } catch (err) {
      if (codeOf(err) === 'session_not_found') return error(404, 'unknown_session', 'no session with this tag');
      throw err;
    }
  }
  return error(404, 'not_found', 'no such API path');
}

async function answerTasks(source: InspectSource, parts: readonly string[], query: URLSearchParams): Promise<ApiAnswer> {
  if (parts.length !== 2) return error(404, 'not_found', 'tasks are listed only (/api/tasks); none is looked up by id or tag here');
  const status = query.get('status') ?? '';
  if (status !== '' && !isTaskStatusName(status)) return error(400, 'bad_request', `status: one of ${TASK_STATUSES.join(', ')}`);
  const principal = query.get('principal') ?? '';
  if (principal !== '' && !isPrincipalFilter(principal)) return error(400, 'bad_request', `principal: ${PRINCIPAL_FILTER_ALLOWED}`);
  const limit = limitOf(query);
  if (limit === undefined) return error(400, 'bad_request', `limit: an integer from 1 to ${MAX_LIMIT}`);
  try {
    return { status: 200, body: await source.listTasks({ limit, ...(status === '' ? {} : { status }), ...(principal === '' ? {} : { principal }) }) };
  } catch (err) {
    if (codeOf(err) === 'unsupported') return error(501, 'unsupported', 'tasks are read from NATS; the operator API this inspector reads through has no task calls');
    throw err;
  }
}
