/**
 * The read model's shapes (model.ts) to and from the operator API's
 * messages (proto/tether/operator/v1/operator.proto). One file for both
 * directions, so a field added to one side is seen missing on the other.
 * Proto3 has no "absent" for plain scalars: optional fields carry it, and an
 * absent optional becomes `undefined` again on the way back.
 */
import type * as wire from '@tether/cursor-proto/operator';
import type { ChainCheck, Connection, EventMark, SessionSummary, SessionTimeline, StreamLane } from './model.js';
import type { RunnerState, TaskList, TaskStatusName, TaskSummary } from './task-model.js';
import { TASK_STATUSES } from './task-statuses.js';

/**
 * A session row either way: the same fields (the wire's optionals are the
 * model's `undefined`s; verdicts copied, never shared), but for the
 * principal, `principal` here and `principal_tag` on the wire (the tag,
 * never the digest: the name says so to other languages' clients).
 */
export function summaryToWire(s: SessionSummary): wire.SessionSummary {
  return { tag: s.tag, principalTag: s.principal, route: s.route, state: s.state, createdAtMs: s.createdAtMs, touchedAtMs: s.touchedAtMs, streams: s.streams, verdicts: { ...s.verdicts } };
}

export function summaryFromWire(s: wire.SessionSummary): SessionSummary {
  return { tag: s.tag, principal: s.principalTag, route: s.route, state: s.state, createdAtMs: s.createdAtMs, touchedAtMs: s.touchedAtMs, streams: s.streams, verdicts: { ...s.verdicts } };
}

export function timelineToWire(t: SessionTimeline): wire.SessionTimeline {
  return {
    session: summaryToWire(t.session),
    lanes: t.lanes.map((lane) => ({
      stream: lane.stream,
      events: lane.events.map((e) => ({ seq: e.seq, pos: e.pos, kind: e.kind, bytes: e.bytes, atMs: e.atMs, writer: e.writer, endReason: e.endReason })),
      writers: lane.writers.map((w) => ({ ...w })),
      ended: lane.ended,
    })),
    connections: t.connections.map((c) => ({
      atMs: c.atMs,
      instance: c.instance,
      kind: c.kind,
      stream: c.stream,
      cursor: c.cursor === undefined ? undefined : { ...c.cursor },
      verdict: c.verdict,
      events: c.events,
      status: c.status,
      endedAtMs: c.endedAtMs,
      reason: c.reason,
      writer: c.writer,
      from: c.from,
    })),
    endedAtMs: t.endedAtMs,
  };
}

export function timelineFromWire(t: wire.SessionTimeline): SessionTimeline {
  if (t.session === undefined) throw new TypeError('ShowSession answered a timeline without its session');
  return {
    session: summaryFromWire(t.session),
    lanes: t.lanes.map(laneFromWire),
    connections: t.connections.map(connectionFromWire),
    endedAtMs: t.endedAtMs,
  };
}

export function checkToWire(c: ChainCheck): wire.ChainCheck {
  return { stream: c.stream, ok: c.ok, events: c.events, problems: c.problems.map((p) => ({ ...p })) };
}

export function checkFromWire(c: wire.ChainCheck): ChainCheck {
  return { stream: c.stream, ok: c.ok, events: c.events, problems: c.problems.map((p) => ({ kind: p.kind, seq: p.seq, pos: p.pos, detail: p.detail })) };
}

function laneFromWire(lane: wire.StreamLane): StreamLane {
  return {
    stream: lane.stream,
    events: lane.events.map(
      (e): EventMark => ({ seq: e.seq, pos: e.pos, kind: e.kind, bytes: e.bytes, atMs: e.atMs, writer: e.writer, ...(e.endReason === undefined ? {} : { endReason: e.endReason }) }),
    ),
    writers: lane.writers.map((w) => ({ writer: w.writer, fromSeq: w.fromSeq, toSeq: w.toSeq, takeover: w.takeover })),
    ended: lane.ended,
  };
}

/** The model leaves out what a connection does not have: absent optionals stay absent, not `undefined` keys. */
function connectionFromWire(c: wire.Connection): Connection {
  return {
    atMs: c.atMs,
    instance: c.instance,
    kind: c.kind,
    stream: c.stream,
    cursor: c.cursor === undefined ? undefined : { stream: c.cursor.stream, seq: c.cursor.seq, pos: c.cursor.pos },
    verdict: c.verdict,
    events: c.events,
    status: c.status,
    ...(c.endedAtMs === undefined ? {} : { endedAtMs: c.endedAtMs }),
    ...(c.reason === undefined ? {} : { reason: c.reason }),
    ...(c.writer === undefined ? {} : { writer: c.writer }),
    ...(c.from === undefined ? {} : { from: c.from }),
  };
}

/**
 * A task row either way, field by field from the `TaskSummary` the NATS
 * path builds (`summarizeTask`): the wire carries exactly what the NATS
 * operator shows, nothing of a record's payloads. The principal is
 * `principal_tag` on the wire, as for sessions.
 */
export function taskToWire(t: TaskSummary): wire.TaskSummary {
  return {
    tag: t.tag,
    status: t.status,
    tool: t.tool,
    route: t.route,
    principalTag: t.principal,
    runnerInstance: t.runnerInstance ?? undefined,
    runner: t.runner,
    attempts: t.attempts,
    reruns: t.reruns,
    rounds: t.rounds,
    idempotent: t.idempotent,
    createdAtMs: t.createdAtMs,
    updatedAtMs: t.updatedAtMs,
    ttlMs: t.ttlMs,
    expiresAtMs: t.expiresAtMs,
    pendingInputs: t.pendingInputs,
    inputResponses: t.inputResponses,
    statusMessage: t.statusMessage ?? undefined,
    errorCode: t.errorCode ?? undefined,
    isError: t.isError ?? undefined,
    bytes: { ...t.bytes },
    replica: t.replica ?? undefined,
  };
}

const RUNNER_STATES: ReadonlySet<string> = new Set<RunnerState>(['alive', 'gone', 'silent', 'none', 'unknown']);

/** A service that says a status or runner state this client does not know gets it as a TypeError, never a row that lies. */
export function taskFromWire(t: wire.TaskSummary): TaskSummary {
  if (!(TASK_STATUSES as readonly string[]).includes(t.status)) throw new TypeError(`ListTasks answered an unknown task status ${JSON.stringify(t.status.slice(0, 40))}`);
  if (!RUNNER_STATES.has(t.runner)) throw new TypeError(`ListTasks answered an unknown runner state ${JSON.stringify(t.runner.slice(0, 40))}`);
  return {
    tag: t.tag,
    status: t.status as TaskStatusName,
    tool: t.tool,
    route: t.route,
    principal: t.principalTag,
    runnerInstance: t.runnerInstance ?? null,
    runner: t.runner as RunnerState,
    attempts: t.attempts,
    reruns: t.reruns,
    rounds: t.rounds,
    idempotent: t.idempotent,
    createdAtMs: t.createdAtMs,
    updatedAtMs: t.updatedAtMs,
    ttlMs: t.ttlMs,
    expiresAtMs: t.expiresAtMs,
    pendingInputs: t.pendingInputs,
    inputResponses: t.inputResponses,
    statusMessage: t.statusMessage ?? null,
    errorCode: t.errorCode ?? null,
    isError: t.isError ?? null,
    bytes: { record: t.bytes?.record ?? 0, params: t.bytes?.params ?? 0, result: t.bytes?.result ?? 0, error: t.bytes?.error ?? 0 },
    replica: t.replica ?? null,
  };
}

export function taskListToWire(list: TaskList): wire.ListTasksResponse {
  return { stream: list.stream, streamExists: list.streamExists, tasks: list.tasks.map(taskToWire) };
}

export function taskListFromWire(res: wire.ListTasksResponse): TaskList {
  return { stream: res.stream, streamExists: res.streamExists, tasks: res.tasks.map(taskFromWire) };
}
