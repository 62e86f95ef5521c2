import { encodeEventId, newEpoch } from '@tether/protocol';
import { StreamHistory, shapeOf } from '@tether/resume-guard';
import type { FetchLike, StreamFinding } from '@tether/resume-guard';
import { Classification, classificationOf, isSilent } from './classification.js';
import { ProbeError, ProbeErrorCode } from './errors.js';
import { McpHttp, PROBE_PROTOCOL_VERSION } from './http.js';
import { probeCursor, runOriginal, runResume, secondStreamIdsUnique } from './steps.js';
import type { CursorAnswer, OriginalRun, ResumeRun, ResumeSummary, StreamSummary } from './steps.js';

/** Options of `runProbe`. */
export interface ProbeOptions {
  /** The MCP endpoint, e.g. `http://host/mcp`. */
  url: string;
  /** Resume on this URL instead (another instance of the same deployment). Default: `url`. */
  via?: string | undefined;
  /** The tool to call. Default: the first tool whose name or description says it streams (count, progress, stream…) and that needs no arguments. */
  tool?: string | undefined;
  /** Arguments of the tool call. Default `{}`. */
  args?: Record<string, unknown> | undefined;
  /** Extra headers on every request (e.g. `authorization`). */
  headers?: Record<string, string> | undefined;
  /** Cut the stream after this many events with ids (the priming event counts). Default 2. */
  cutAfterEvents?: number | undefined;
  /** Pause between the cut and the resume, so the server moves on. Default 300 ms. */
  waitMs?: number | undefined;
  /** Deadline of each step that waits for the server. Default 10 000 ms. */
  timeoutMs?: number | undefined;
  /** The fetch to use. Default `globalThis.fetch`. */
  fetch?: FetchLike | undefined;
}

/** The probe's findings. Stable field names; `null` where there is nothing to say. One line of JSON with `--json`. */
export interface ProbeReport {
  readonly url: string;
  readonly via: string | null;
  readonly tool: string;
  readonly classification: Classification;
  /** True for a failure a client's happy path cannot see (the CLI exits 1). */
  readonly silent: boolean;
  /** One sentence: what decided the classification. */
  readonly detail: string;
  /** The server's explicit verdict (`Tether-Resume`, or a refusal body's `error.data.verdict`). */
  readonly verdict: string | null;
  /** How `initialize` was answered. */
  readonly initialize: 'json' | 'sse';
  readonly original: StreamSummary;
  readonly resume: ResumeSummary | null;
  readonly unknownCursor: CursorAnswer | null;
  readonly malformedCursor: CursorAnswer | null;
  readonly idsUniqueAcrossStreams: boolean | null;
}

/** The `Last-Event-ID` the probe sends to see how a malformed cursor is answered. */
export const MALFORMED_CURSOR = 'tether-probe: not an event id!';

const STREAMING_HINT = /stream|progress|count|tick|long|slow|wait|sleep|watch|tail|poll/i;
const MAX_CANDIDATES = 3;
const CURSOR_READ_MS = 300;

/**
 * Probes an MCP endpoint's resumption: opens a session, runs a streaming
 * tool call, cuts it, resumes with `Last-Event-ID` (on `via` if given), and
 * classifies what came back with the same structural checks as
 * `@tether/resume-guard`. Also records how an unknown and a malformed cursor
 * are answered, whether ids are unique across streams, and whether the
 * server primes its streams and sends `retry`.
 *
 * Throws `ProbeError` (`unreachable`, `initialize_failed`,
 * `no_streaming_tool`, `stream_too_short`) when it cannot run the checks.
 */
export async function runProbe(options: ProbeOptions): Promise<ProbeReport> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const args = options.args ?? {};
  const http = new McpHttp(options.url, options.headers ?? {}, options.fetch ?? ((i, init) => globalThis.fetch(i, init)));
  try {
    const init = await initialize(http, timeoutMs);
    const history = new StreamHistory();
    const candidates = options.tool === undefined ? await discoverTools(http, timeoutMs) : [options.tool];
    let tool = candidates[0] as string;
    let original: OriginalRun | undefined;
    for (const name of candidates) {
      tool = name;
      original = await runOriginal(http, 'tether-probe-1', name, args, options.cutAfterEvents ?? 2, history, timeoutMs);
      if (original.streamed) break;
    }
    const run = original as OriginalRun;
    const base = { url: options.url, via: options.via ?? null, tool, initialize: init.via, original: run.summary };
    const none = { resume: null, unknownCursor: null, malformedCursor: null, idsUniqueAcrossStreams: null };
    if (!run.streamed) {
      return finish({ ...base, ...none }, Classification.notResumable, `tools/call ${tool} was answered with JSON: nothing streamed, so nothing can resume`);
    }
    if (run.finding !== undefined) return finish({ ...base, ...none }, classificationOf(run.finding.code), sentence(run.finding, 'the original stream'));
    const cursor = run.summary.lastEventId;
    if (cursor === null) {
      const afterJson = init.via === 'json' ? ' (after JSON answers on the same session)' : '';
      return finish({ ...base, ...none }, Classification.notResumable, `the stream of ${tool} carries no event ids${afterJson}`);
    }
    await new Promise((r) => setTimeout(r, options.waitMs ?? 300));
    const target = options.via ?? options.url;
    const resumed = await runResume(http, target, 'tether-probe-1', cursor, history, timeoutMs);
    const unknownCursor = await probeCursor(http, target, unknownIdLike(cursor), CURSOR_READ_MS);
    const malformedCursor = await probeCursor(http, target, MALFORMED_CURSOR, CURSOR_READ_MS);
    const earlier = new Set([...init.ids, ...run.ids, ...resumed.ids]);
    const idsUniqueAcrossStreams = await secondStreamIdsUnique(http, 'tether-probe-2', tool, args, earlier, timeoutMs);
    const report = { ...base, resume: resumed.summary, unknownCursor, malformedCursor, idsUniqueAcrossStreams };
    return classifyResume(report, resumed);
  } finally {
    await http.close();
  }
}

type Unclassified = Omit<ProbeReport, 'classification' | 'silent' | 'detail' | 'verdict'>;

function finish(r: Unclassified, classification: Classification, detail: string, verdict: string | null = null): ProbeReport {
  // Verdict fields first: the JSON line reads left to right.
  const { url, via, tool, ...seen } = r;
  return { url, via, tool, classification, silent: isSilent(classification), detail, verdict, ...seen };
}

function classifyResume(r: Unclassified & { resume: ResumeSummary }, resumed: ResumeRun): ProbeReport {
  const { resume } = r;
  if (resumed.refusal !== undefined) {
    const { verdict, message } = resumed.refusal;
    const why = `HTTP ${resume.status}${verdict === null ? '' : ` with verdict ${verdict}`}${message === null ? '' : `: ${message}`}`;
    return finish(r, Classification.explicitRefusal, `the resume from ${resume.lastEventId} was refused, ${why}`, verdict);
  }
  const verdict = resume.tetherResume;
  if (resumed.finding !== undefined) return finish(r, classificationOf(resumed.finding.code), sentence(resumed.finding, 'the resumed stream'), verdict);
  if (resume.events === 0 && !resume.completed) {
    return finish(r, Classification.gap, `the resume from ${resume.lastEventId} delivered no events and never completed the request: everything after the cursor is missing`, verdict);
  }
  const end = resume.completed ? ', through the final response' : ` (the request had not completed after ${resume.events} event(s))`;
  return finish(r, Classification.correct, `resumed after ${resume.lastEventId} with ${resume.firstEventId ?? 'an event without id'} and ${resume.events - 1} more event(s)${end}`, verdict);
}

function sentence(f: StreamFinding, where: string): string {
  const ids = f.eventId === undefined ? '' : ` (got ${f.eventId}${f.expectedEventId === undefined ? '' : `, expected ${f.expectedEventId}`})`;
  return `${where}, ${f.position === 'first' ? 'at its first event' : 'inside it'}: ${f.reason}${ids}`;
}

async function initialize(http: McpHttp, timeoutMs: number): Promise<{ via: 'json' | 'sse'; ids: readonly string[] }> {
  const params = { protocolVersion: PROBE_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'tether-probe', version: '0.1.0' } };
  let answer: Awaited<ReturnType<McpHttp['request']>>;
  try {
    answer = await http.request('tether-probe-init', 'initialize', params, timeoutMs);
  } catch (err) {
    throw new ProbeError(ProbeErrorCode.initializeFailed, err instanceof Error ? err.message : String(err), { cause: err });
  }
  if (answer.sessionId === null) {
    throw new ProbeError(ProbeErrorCode.initializeFailed, 'initialize gave no Mcp-Session-Id: a sessionless (stateless) server has nothing to resume');
  }
  http.sessionId = answer.sessionId;
  const version = (answer.result as { protocolVersion?: unknown } | undefined)?.protocolVersion;
  if (typeof version === 'string') http.protocolVersion = version;
  await http.notify('notifications/initialized');
  return { via: answer.via, ids: answer.ids };
}

async function discoverTools(http: McpHttp, timeoutMs: number): Promise<string[]> {
  const { result } = await http.request('tether-probe-tools', 'tools/list', {}, timeoutMs);
  const tools = ((result as { tools?: unknown }).tools ?? []) as Array<{ name?: unknown; description?: unknown; inputSchema?: { required?: unknown } }>;
  const names = tools.map((t) => String(t.name));
  const candidates = tools
    .filter((t) => typeof t.name === 'string' && STREAMING_HINT.test(`${t.name} ${typeof t.description === 'string' ? t.description : ''}`))
    .filter((t) => !Array.isArray(t.inputSchema?.required) || t.inputSchema.required.length === 0)
    .map((t) => t.name as string)
    .slice(0, MAX_CANDIDATES);
  if (candidates.length > 0) return candidates;
  throw new ProbeError(
    ProbeErrorCode.noStreamingTool,
    `no tool looks like it streams (found: ${names.join(', ') || 'none'}); name one with --tool NAME [--args JSON]`,
  );
}

/** A cursor of the same shape as `like` that the server cannot have issued. */
export function unknownIdLike(like: string): string {
  const shape = shapeOf(like);
  if (shape.kind === 'tether') {
    let epoch = newEpoch();
    while (epoch === shape.id.epoch) epoch = newEpoch();
    return encodeEventId({ ...shape.id, epoch });
  }
  if (shape.kind === 'numeric') return String(shape.n + 1_000_000);
  return `${like}-tether-probe-unknown`;
}
