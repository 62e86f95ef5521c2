import fc from 'fast-check';
import { createWriterPresence, SDK_GET_STREAM, TetherEventStore } from '@tether/sdk';
import type { WriterPresence } from '@tether/sdk';
import { decodeEventId } from '@tether/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CaseCounter, FUZZ_SEED, fuzzParams } from './fuzz-kit.js';
import { answerProblems, leakProblems, principalMatches, report, wireValue } from './gateway-checks.js';
import { NoAnswer, PROTOCOL_VERSION, SeedPool } from './gateway-stack.js';
import type { SeededSession, WireRequest, WireResponse } from './gateway-stack.js';
import { cursorRecipe, deriveCursor, fuzzedRequest, materialize, wireHeaders } from './http-arbitraries.js';
import { presenceCase, storeProgram, taskProgram } from './sdk-arbitraries.js';
import { routerServes, runPresenceCase } from './sdk-checks.js';
import { startSdkStack } from './sdk-stack.js';
import type { SdkStack } from './sdk-stack.js';
import { runStoreCase } from './sdk-store-model.js';
import { runTaskCase } from './sdk-task-model.js';

/**
 * Fuzzing the stores of @tether/sdk (issue 15), in this process on a real
 * nats-server (random loopback ports, fresh store dir), against plain
 * models of what each promises (sdk-store-model.ts, sdk-task-model.ts):
 *
 * - EventStore: programs of `storeEvent` over POST streams and the GET
 *   stream of two sessions, from two instances (one of them writing the
 *   same session), sequential, in concurrent bursts, and racing each other
 *   on one GET stream, with priming
 *   events, responses that end a stream (or not), oversized messages;
 *   purges (what retention does); and `replayEventsAfter` from any cursor
 *   (the session's own, another stream's, another session's, mutated,
 *   malformed, truncated, purged, random). Every answer, the log's content
 *   after every program, and every replay (exactly the gap-free suffix to
 *   the stream's end, or an explicit refusal naming its verdict) match the
 *   model; never another stream's or session's event, never a silent replay
 *   from zero or a skipped event.
 * - durable tasks: programs of every TaskStore and TaskMessageQueue call
 *   with any ids (own, another principal's, one character off, cut,
 *   upper-case, non-strings), TTLs, statuses, results, queued messages and
 *   queue bounds, as four principals and five sessions, with retries of the
 *   previous write: every answer matches the model; a task is never seen by
 *   another principal or session; bad input gets the store's code and a
 *   message naming it.
 * - writer presence: any question on a writer's subject is answered as
 *   holdPresence promises, or not at all, and the next probe is answered.
 * - session router: the gateway suite's fuzzed requests and cross-session
 *   cursors against createSessionRouter on node:http in front of an SDK v1
 *   server (gateway-checks.ts: no 5xx but a 503 blaming the session log,
 *   JSON-RPC errors on every 4xx, no other session's data).
 *
 * After every refused call a good one must succeed (the store keeps
 * serving). Seed: TETHER_FUZZ_SEED (printed); scale: TETHER_FUZZ_RUNS.
 */

const RUNS = { eventStore: 150, tasks: 200, presence: 40, routerRequests: 120, routerCrossSession: 80 } as const;

/**
 * How long a replay may take to settle once every stream of its case has
 * ended: a hang bound (they settle in milliseconds), kept short so that
 * shrinking a hang stays within the test's time.
 */
const REPLAY_SETTLE_MS = 5_000;

const counter = new CaseCounter();
const started = performance.now();
let stack: SdkStack;
let pool: SeedPool;
const slots: SeededSession[] = [];
let canaryStore: TetherEventStore;
let canarySeq = 0;
let canaryTask: { id: string; createdMs: number } | undefined;
let presence: WriterPresence;
let caseNo = 0;

beforeAll(async () => {
  console.log(`sdk fuzz: seed ${FUZZ_SEED} (TETHER_FUZZ_SEED to change it)`);
  stack = await startSdkStack();
  const [one] = stack.instances;
  canaryStore = new TetherEventStore({ log: one.log, session: await one.log.createSession('canary'), presence: one.presence });
  presence = createWriterPresence(one.log);
  pool = new SeedPool(() => stack.router.seed(), 2);
  slots.push(await pool.take(), await pool.take());
});

afterAll(async () => {
  await pool?.drain();
  await presence?.close();
  await stack?.stop();
  console.log(counter.summary('sdk', performance.now() - started));
});

/** A good storeEvent after a bad call: the canary session's GET stream takes its next event. */
async function storeServes(): Promise<void> {
  const id = await canaryStore.storeEvent(SDK_GET_STREAM, { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'canary' } });
  canarySeq += 1;
  const decoded = decodeEventId(id);
  if (!decoded.ok || decoded.value.seq !== canarySeq) throw new Error(`after a refused call, a good storeEvent answered ${id}, expected seq ${canarySeq}`);
}

/** A good task call after a bad one: the canary task (re-created every 30 min; its TTL is the 1 h cap) reads back. */
async function tasksServe(): Promise<void> {
  const { taskStore } = stack.tasks.forPrincipal('canary');
  if (canaryTask === undefined || Date.now() - canaryTask.createdMs > 1_800_000) {
    canaryTask = { id: (await taskStore.createTask({ ttl: null }, 1, { method: 'tools/call', params: {} }, 'canary')).taskId, createdMs: Date.now() };
  }
  const task = await taskStore.getTask(canaryTask.id, 'canary');
  if (task?.taskId !== canaryTask.id) throw new Error(`after a refused call, a good getTask answered ${JSON.stringify(task)}`);
}

function tally(property: string, notes: readonly string[]): void {
  for (const n of notes) counter.note(property, n);
}

const reported = new Set<string>();
/** Fails the case; the first failure of a property is also printed at once (a hang may leave shrinking no time to report it). */
function fail(property: string, problems: readonly string[]): never {
  const text = `${property}\n${problems.map((p) => `  - ${p}`).join('\n')}`;
  if (!reported.has(property)) {
    reported.add(property);
    console.log(`first failure (before shrinking) of ${text}`);
  }
  throw new Error(text);
}

describe('@tether/sdk stores under fuzzed programs', () => {
  it('EventStore: any interleaving of stores, bursts and purges over streams and sessions; a replay from any cursor is the exact gap-free suffix of its stream or an explicit refusal', async () => {
    const property = 'sdk-event-store';
    await fc.assert(
      fc.asyncProperty(storeProgram, async (program) => {
        counter.hit(property);
        const t0 = performance.now();
        const { problems, notes } = await runStoreCase(stack, program, { afterBad: storeServes, answerMs: REPLAY_SETTLE_MS });
        counter.time(property, performance.now() - t0);
        tally(property, notes);
        if (problems.length > 0) fail(property, problems);
      }),
      fuzzParams(RUNS.eventStore),
    );
    // Not vacuous: replays were accepted and refused for each reason, stores ended streams, purges ran.
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    for (const seen of [/replay resumed/, /resume_refused\/epoch_mismatch/, /resume_refused\/malformed/, /resume_refused\/truncated/, /replay unsupported/, /store post (event|prime)\+end/, /store payload_too_large/, /purge keep 0/, /race stored/, /resume resumed/]) expect(outcomes).toMatch(seen);
  });

  it('durable tasks: any sequence of create/get/update/result/list/cancel/queue calls with any ids, TTLs and payloads answers as the model does; no task is seen by another principal or session', async () => {
    const property = 'sdk-tasks';
    await fc.assert(
      fc.asyncProperty(taskProgram, async (program) => {
        counter.hit(property);
        caseNo += 1;
        const t0 = performance.now();
        const { problems, notes } = await runTaskCase(stack.tasks, program, { tag: `${FUZZ_SEED}-${caseNo}`, afterBad: tasksServe });
        counter.time(property, performance.now() - t0);
        tally(property, notes);
        if (problems.length > 0) fail(property, problems);
      }),
      fuzzParams(RUNS.tasks),
    );
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    for (const seen of [/get task/, /get null/, /task_not_found/, /task_terminal/, /result_already_stored/, /invalid_task_id/, /store-result again/, /list \d \+more/, /queue_full/, /dequeue one/]) expect(outcomes).toMatch(seen);
  });

  it('writer presence: any question on its subject gets the answer holdPresence promises or none, and the next probe is answered', async () => {
    const property = 'sdk-presence';
    await fc.assert(
      fc.asyncProperty(presenceCase, async (c) => {
        counter.hit(property);
        const t0 = performance.now();
        const { problems, notes } = await runPresenceCase(stack, presence, c);
        counter.time(property, performance.now() - t0);
        tally(property, notes);
        if (problems.length > 0) fail(property, problems);
      }),
      fuzzParams(RUNS.presence),
    );
  });
});

// ---- the session router: the gateway suite's requests, against createSessionRouter ----

async function exchange(title: string, req: WireRequest): Promise<WireResponse> {
  try {
    const res = await stack.router.send(req);
    counter.time(title, res.elapsedMs);
    return res;
  } catch (err) {
    if (err instanceof NoAnswer) throw new Error(report(`${title}: no answer`, req, undefined, [err.message], []));
    throw err;
  }
}

function check(title: string, req: WireRequest, res: WireResponse, named: SeededSession | undefined): void {
  const problems = [...answerProblems(req, res), ...leakProblems(req, res, named, pool.all)];
  if (problems.length > 0) throw new Error(report(title, req, res, problems, []));
}

/** A request naming a seeded session may have closed it (DELETE): resuming at its last response answers 204 while it lives, 404 once closed. */
async function refreshSlot(slot: number): Promise<void> {
  const s = slots[slot]!;
  const res = await stack.router.send({
    method: 'GET',
    path: '/mcp',
    headers: { accept: 'text/event-stream', 'mcp-session-id': s.sessionId, 'last-event-id': s.ids.at(-1)!, 'mcp-protocol-version': PROTOCOL_VERSION },
    body: undefined,
  });
  if (res.status === 204) return;
  if (res.status !== 404) throw new Error(`liveness probe of session ${s.sessionId} answered ${res.status}: ${res.body.slice(0, 300)}`);
  slots[slot] = await pool.take();
}

/** After an error answer, a good request must succeed. */
async function afterError(title: string, res: WireResponse): Promise<void> {
  if (res.status < 400) return;
  await refreshSlot(0);
  const why = await routerServes(stack.router, slots[0]!);
  if (why !== undefined) throw new Error(`${title}: after a ${res.status}, ${why}`);
}

describe('createSessionRouter under fuzzed requests', () => {
  it('answers any request in time, without a 5xx not caused by the log, with JSON-RPC errors, never with another session\'s events, and serves the next good request', async () => {
    const property = 'sdk-router-requests';
    await fc.assert(
      fc.asyncProperty(
        fuzzedRequest,
        async (r) => {
          counter.hit(property);
          const { named, req } = materialize(r, slots);
          const res = await exchange(property, req);
          counter.note(property, `${r.method.toUpperCase()} ${res.status}${res.headers['tether-resume'] === undefined ? '' : ` ${res.headers['tether-resume']}`}`);
          check(property, req, res, named);
          if (r.session.t === 'seeded') await refreshSlot(r.session.slot);
          await afterError(property, res);
        },
      ),
      fuzzParams(RUNS.routerRequests),
    );
  });

  it('never delivers an event of session A to a request as session B with cursors derived from A\'s ids, mutated, or B\'s own (and vice versa)', async () => {
    const property = 'sdk-router-cross-session';
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          victim: fc.nat({ max: 1 }),
          cursors: fc.array(cursorRecipe(fc.oneof({ weight: 4, arbitrary: fc.constant('source' as const) }, { weight: 1, arbitrary: fc.constant('victim' as const) })), { minLength: 1, maxLength: 2 }),
          method: fc.oneof({ weight: 6, arbitrary: fc.constant('GET') }, { weight: 1, arbitrary: fc.constant('POST') }),
          accept: fc.constantFrom('text/event-stream', 'application/json, text/event-stream', '*/*'),
          protocolVersion: fc.constantFrom(PROTOCOL_VERSION, '2025-06-18', undefined),
        }),
        async (r) => {
          counter.hit(property);
          for (const recipe of r.cursors) {
            const victim = slots[r.victim]!;
            const source = slots[1 - r.victim]!;
            const lastEventId = deriveCursor(recipe, { victim, source });
            const headers: Record<string, string> = { accept: r.accept, 'mcp-session-id': victim.sessionId, 'last-event-id': lastEventId };
            if (r.protocolVersion !== undefined) headers['mcp-protocol-version'] = r.protocolVersion;
            const post = r.method === 'POST';
            if (post) headers['content-type'] = 'application/json';
            const req: WireRequest = { method: r.method, path: '/mcp', headers: wireHeaders(headers), body: post ? Buffer.from('{"jsonrpc":"2.0","id":7,"method":"ping"}') : undefined };
            const res = await exchange(property, req);
            const verdict = res.headers['tether-resume'];
            counter.note(property, `${r.method} ${res.status}${verdict === undefined ? '' : ` ${verdict}`}${recipe.base === 'source' && wireValue(lastEventId)?.startsWith(source.epoch) ? ' (A epoch)' : ''}`);
            check(property, req, res, victim);
            expect(principalMatches(req)).toBe(true);
            await afterError(property, res);
          }
          await refreshSlot(r.victim);
        },
      ),
      fuzzParams(RUNS.routerCrossSession),
    );
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    expect(outcomes).toMatch(/epoch_mismatch/);
    expect(outcomes).toMatch(/resumed/);
  });
});

