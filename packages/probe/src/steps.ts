import { HttpHeader, isResumeAck, parseResumeAck } from '@tether/protocol';
import type { ResumeAck } from '@tether/protocol';
import { StreamCheck, shapeOf } from '@tether/resume-guard';
import type { IdKind, StreamFinding, StreamHistory } from '@tether/resume-guard';
import { ProbeError, ProbeErrorCode } from './errors.js';
import { answerTo, isSse, readSse } from './http.js';
import type { McpHttp } from './http.js';

/** What the probe saw on the original (cut) stream. */
export interface StreamSummary {
  /** Events read before the cut (blocks with an id or data). */
  readonly events: number;
  /** Format of the ids: `tether`, `numeric`, `opaque`, or `none`. */
  readonly idFormat: IdKind | 'none';
  /** The first event was a priming event: an id and empty data (SEP-1699). */
  readonly priming: boolean;
  /** The `retry:` hint, if any. */
  readonly retryMs: number | null;
  /** The cursor the probe resumed from: the last id before the cut. */
  readonly lastEventId: string | null;
}

/** Result of running the tool call and cutting it. */
export interface OriginalRun {
  readonly streamed: boolean;
  readonly summary: StreamSummary;
  readonly ids: readonly string[];
  readonly finding: StreamFinding | undefined;
}

/** What the probe saw on the resumed stream. */
export interface ResumeSummary {
  readonly url: string;
  readonly lastEventId: string;
  readonly status: number;
  readonly contentType: string | null;
  readonly tetherResume: string | null;
  /** The first id after the cursor (the resume acknowledgment is not an event). */
  readonly firstEventId: string | null;
  readonly expectedEventId: string | null;
  /** The server's resume acknowledgment (`event: resume`), when it sent a well-formed one. */
  readonly ack: ResumeAck | null;
  /** Events after the cursor (blocks with an id or data; the acknowledgment not counted). */
  readonly events: number;
  /** The final response of the tool call arrived on the resumed stream. */
  readonly completed: boolean;
}

export interface ResumeRun {
  readonly summary: ResumeSummary;
  readonly ids: readonly string[];
  readonly finding: StreamFinding | undefined;
  /** Set when the server refused: its verdict and message. */
  readonly refusal: { readonly verdict: string | null; readonly message: string | null } | undefined;
}

/** How the endpoint answered a cursor it cannot know. */
export interface CursorAnswer {
  readonly sent: string;
  readonly status: number;
  readonly verdict: string | null;
  /** A status or verdict a client can see; false for a silent 2xx. */
  readonly explicit: boolean;
  /** Events it sent anyway (within a short read). */
  readonly events: number;
}

const PROGRESS_TOKEN = 'tether-probe';

function toolCall(id: string, tool: string, args: Record<string, unknown>): unknown {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args, _meta: { progressToken: PROGRESS_TOKEN } } };
}

/**
 * Calls the tool and cuts its stream after `cutAfter` events with ids. Every
 * event goes through the guard's `StreamCheck`, so a stream that loses its
 * ids before the cut is caught here already.
 */
export async function runOriginal(
  http: McpHttp,
  callId: string,
  tool: string,
  args: Record<string, unknown>,
  cutAfter: number,
  history: StreamHistory,
  timeoutMs: number,
): Promise<OriginalRun> {
  const { res, abort } = await http.post(toolCall(callId, tool, args));
  if (!res.ok) {
    await res.body?.cancel();
    throw new ProbeError(ProbeErrorCode.unreachable, `tools/call ${tool} answered HTTP ${res.status}`);
  }
  const ids: string[] = [];
  let events = 0;
  let dataOnly = 0;
  let priming = false;
  let retryMs: number | null = null;
  let completed = false;
  let finding: StreamFinding | undefined;
  if (!isSse(res)) {
    await res.body?.cancel();
    return { streamed: false, ids, finding, summary: { events: 0, idFormat: 'none', priming, retryMs, lastEventId: null } };
  }
  const check = new StreamCheck(history);
  await readSse(res, abort, timeoutMs, (m) => {
    if (m.retryMs !== undefined) retryMs = m.retryMs;
    const id = m.id === '' ? undefined : m.id;
    if (id === undefined && m.data === '') return false;
    if (events === 0 && id !== undefined && m.data === '') priming = true;
    events += 1;
    finding = check.push(m);
    if (finding !== undefined) return true;
    if (id !== undefined) ids.push(id);
    else dataOnly += 1;
    completed = answerTo(callId, m.data) !== undefined;
    return completed || ids.length >= cutAfter || (ids.length === 0 && dataOnly >= 3);
  });
  check.commit();
  if (completed && ids.length > 0 && finding === undefined) {
    throw new ProbeError(
      ProbeErrorCode.streamTooShort,
      `tools/call ${tool} finished after ${events} event(s), before the probe could cut it; make it run longer (--args) or lower --cut-after`,
    );
  }
  const last = ids.at(-1);
  const summary: StreamSummary = {
    events,
    idFormat: last === undefined ? 'none' : shapeOf(last).kind,
    priming,
    retryMs,
    lastEventId: last ?? null,
  };
  return { streamed: true, ids, finding, summary };
}

/** Resumes from `cursor` at `url` and checks the answer with the guard's `StreamCheck`. */
export async function runResume(
  http: McpHttp,
  url: string,
  callId: string,
  cursor: string,
  history: StreamHistory,
  timeoutMs: number,
): Promise<ResumeRun> {
  const { res, abort } = await http.resume(url, cursor);
  const tetherResume = res.headers.get(HttpHeader.tetherResume);
  const base = {
    url,
    lastEventId: cursor,
    status: res.status,
    contentType: res.headers.get('content-type'),
    tetherResume,
    firstEventId: null,
    expectedEventId: null,
    ack: null,
    events: 0,
    completed: false,
  };
  if (!res.ok || (tetherResume !== null && tetherResume !== 'resumed')) {
    const body = await refusalBody(res);
    return { summary: base, ids: [], finding: undefined, refusal: { verdict: tetherResume ?? body.verdict, message: body.message } };
  }
  if (!isSse(res)) {
    await res.body?.cancel();
    const finding: StreamFinding = {
      code: 'silent_fallback',
      position: 'first',
      reason: `the resume was answered with ${base.contentType ?? 'no content type'}, not an event stream`,
    };
    return { summary: base, ids: [], finding, refusal: undefined };
  }
  const check = new StreamCheck(history, { cursor });
  const ids: string[] = [];
  let events = 0;
  let firstEventId: string | null = null;
  let ack: ResumeAck | null = null;
  let completed = false;
  let finding: StreamFinding | undefined;
  await readSse(res, abort, timeoutMs, (m) => {
    const id = m.id === '' ? undefined : m.id;
    if (id === undefined && m.data === '') return false;
    // The acknowledgment opens the stream: the server's resume point, checked like an event, counted as none.
    const opening = events === 0 && ack === null && isResumeAck(m);
    if (!opening) {
      if (firstEventId === null && id !== undefined) firstEventId = id;
      events += 1;
    }
    finding = check.push(m);
    if (finding !== undefined) return true;
    if (opening) {
      const parsed = parseResumeAck(m.data);
      if (parsed.ok) ack = parsed.value;
      return false;
    }
    if (id !== undefined) ids.push(id);
    completed = answerTo(callId, m.data) !== undefined;
    return completed;
  });
  finding ??= check.end();
  check.commit();
  return {
    summary: { ...base, firstEventId, expectedEventId: finding?.expectedEventId ?? null, ack, events, completed },
    ids,
    finding,
    refusal: undefined,
  };
}

/** Sends a cursor the endpoint cannot honour and records how it answers. */
export async function probeCursor(http: McpHttp, url: string, cursor: string, readMs: number): Promise<CursorAnswer> {
  const { res, abort } = await http.resume(url, cursor, 5);
  const header = res.headers.get(HttpHeader.tetherResume);
  if (!res.ok) {
    const body = await refusalBody(res);
    return { sent: cursor, status: res.status, verdict: header ?? body.verdict, explicit: true, events: 0 };
  }
  let events = 0;
  if (isSse(res)) {
    await readSse(res, abort, readMs, (m) => {
      if ((m.id !== undefined && m.id !== '') || m.data !== '') events += 1;
      return events >= 20;
    });
  } else {
    await res.body?.cancel();
  }
  return { sent: cursor, status: res.status, verdict: header, explicit: header !== null && header !== 'resumed', events };
}

/**
 * Opens a second stream of the same tool and reads its first ids: are they
 * new, or do they repeat ids of earlier streams of the session? `null` when
 * either side has no ids.
 */
export async function secondStreamIdsUnique(
  http: McpHttp,
  callId: string,
  tool: string,
  args: Record<string, unknown>,
  earlier: ReadonlySet<string>,
  timeoutMs: number,
): Promise<boolean | null> {
  const { res, abort } = await http.post(toolCall(callId, tool, args));
  if (!res.ok || !isSse(res)) {
    await res.body?.cancel();
    return null;
  }
  const ids: string[] = [];
  await readSse(res, abort, timeoutMs, (m) => {
    if (m.id !== undefined && m.id !== '') ids.push(m.id);
    return ids.length >= 3 || answerTo(callId, m.data) !== undefined;
  });
  if (ids.length === 0 || earlier.size === 0) return null;
  return !ids.some((id) => earlier.has(id));
}

async function refusalBody(res: Response): Promise<{ verdict: string | null; message: string | null }> {
  try {
    const body = JSON.parse(await res.text()) as { error?: { message?: unknown; data?: { verdict?: unknown } } };
    const verdict = body.error?.data?.verdict;
    const message = body.error?.message;
    return { verdict: typeof verdict === 'string' ? verdict : null, message: typeof message === 'string' ? message : null };
  } catch {
    return { verdict: null, message: null };
  }
}
