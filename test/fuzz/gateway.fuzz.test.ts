import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CaseCounter, FUZZ_SEED, fuzzParams } from './fuzz-kit.js';
import { answerProblems, leakProblems, principalMatches, report, wireValue } from './gateway-checks.js';
import { NoAnswer, PROTOCOL_VERSION, SeedPool, startGatewayStack } from './gateway-stack.js';
import type { GatewayStack, SeededSession, WireRequest, WireResponse } from './gateway-stack.js';
import { cursorRecipe, deriveCursor, fieldText, fuzzedRequest, materialize, wireHeaders } from './http-arbitraries.js';

/**
 * Fuzzing a running tether-gateway (issue 7): fast-check requests against the
 * real process (built dist) on a real nats-server, in front of an upstream on
 * the official SDK with an event store. Two seeded sessions, A and B, have
 * streamed tool calls in the log; their payloads carry a marker no request
 * ever sends.
 *
 * Properties, checked on every answer:
 * - no hang: headers (and any body but an open SSE stream) within 20 s (ANSWER_MS; the slowest answer is printed);
 * - no 5xx but 502/503 whose JSON-RPC error names the upstream or the log;
 * - every 4xx carries a JSON-RPC error naming the problem;
 * - no event of one session in an answer to another (marker, epoch, id);
 * and after every batch the process is alive and /healthz answers 200.
 *
 * Seed: TETHER_FUZZ_SEED (printed); scale: TETHER_FUZZ_RUNS.
 */

const RUNS = { requests: 300, crossSession: 250, oversizedHeaders: 12 } as const;
const HEALTH_EVERY = 10;

const counter = new CaseCounter();
const started = performance.now();
let stack: GatewayStack;
let pool: SeedPool;
/** The two live seeded sessions, A and B; a slot is refilled when a request closed its session. */
const slots: SeededSession[] = [];

beforeAll(async () => {
  console.log(`gateway fuzz: seed ${FUZZ_SEED} (TETHER_FUZZ_SEED to change it)`);
  stack = await startGatewayStack();
  pool = new SeedPool(() => stack.seed(), 2);
  slots.push(await pool.take(), await pool.take());
});

afterAll(async () => {
  await pool?.drain();
  const status = await stack?.stop();
  console.log(counter.summary('gateway', performance.now() - started));
  // A SIGTERM drain that fails or a crash on the way out is a finding too.
  expect(status).toEqual({ code: 0, signal: null });
});

function warnings(): string[] {
  return stack.gateway.stdoutLines.filter((l) => /"level":(4|5|6)0/.test(l)).slice(-8);
}

/** Sends, and turns "no answer in time" into a report. */
async function exchange(title: string, req: WireRequest): Promise<WireResponse> {
  try {
    const res = await stack.send(req);
    counter.time(title, res.elapsedMs);
    return res;
  } catch (err) {
    if (err instanceof NoAnswer) throw new Error(report(`${title}: no answer`, req, undefined, [err.message], warnings()));
    throw err;
  }
}

function check(title: string, req: WireRequest, res: WireResponse, named: SeededSession | undefined): void {
  const problems = [...answerProblems(req, res), ...leakProblems(req, res, named, pool.all)];
  if (problems.length > 0) throw new Error(report(title, req, res, problems, warnings()));
}

async function healthCheck(every: number, property: string): Promise<void> {
  if (counter.count(property) % every !== 0) return;
  const health = await stack.healthy();
  if (!health.ok) throw new Error(`after ${counter.count(property)} cases of ${property}: ${health.why}\nstderr:\n${stack.gateway.stderrLines.slice(-20).join('\n')}`);
}

/**
 * A request that named a seeded session may have ended it (DELETE, or a
 * refused resume terminates it). Its last event is the end of a finished
 * stream: resuming there answers 204 while it lives and 404 once closed,
 * and changes nothing.
 */
async function refreshSlot(slot: number): Promise<void> {
  const s = slots[slot]!;
  const res = await stack.send({
    method: 'GET',
    path: '/mcp',
    headers: { accept: 'text/event-stream', 'mcp-session-id': s.sessionId, 'last-event-id': s.ids.at(-1)!, 'mcp-protocol-version': PROTOCOL_VERSION },
    body: undefined,
  });
  if (res.status === 204) return;
  if (res.status !== 404) throw new Error(`liveness probe of session ${s.sessionId} answered ${res.status}: ${res.body.slice(0, 300)}`);
  slots[slot] = await pool.take();
}

describe('tether-gateway under fuzzed requests', () => {
  it('answers any request in time, without a 5xx not caused by the upstream or log, with JSON-RPC errors, and never with another session\'s events', async () => {
    const property = 'gateway-requests';
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
          await healthCheck(HEALTH_EVERY, property);
        },
      ),
      fuzzParams(RUNS.requests),
    );
    expect((await stack.healthy()).ok).toBe(true);
  });

  it('never delivers an event of session A to a request as session B with cursors derived from A\'s ids, mutated, or B\'s own (and vice versa)', async () => {
    const property = 'gateway-cross-session';
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          victim: fc.nat({ max: 1 }),
          // Mostly the other session's ids; some of the victim's own, so some resumes are accepted.
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
          }
          await refreshSlot(r.victim);
          await healthCheck(HEALTH_EVERY, property);
        },
      ),
      fuzzParams(RUNS.crossSession),
    );
    expect((await stack.healthy()).ok).toBe(true);
    // Not vacuous: some cursors of the other session reached the epoch check, and some resumes were accepted.
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    expect(outcomes).toMatch(/epoch_mismatch/);
    expect(outcomes).toMatch(/resumed/);
  });

  it('refuses a header block over --max-header-bytes with 431 and a JSON-RPC error body', async () => {
    const property = 'gateway-oversized-headers';
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          name: fc.constantFrom('last-event-id', 'authorization', 'mcp-session-id', 'x-fuzz'),
          size: fc.integer({ min: 16 * 1024 + 1, max: 64 * 1024 }),
          fill: fieldText(8).filter((s) => s.trim() !== ''),
          method: fc.constantFrom('GET', 'POST', 'DELETE'),
        }),
        async (r) => {
          counter.hit(property);
          const value = r.fill.repeat(Math.ceil(r.size / r.fill.length)).slice(0, r.size);
          const req: WireRequest = { method: r.method, path: '/mcp', headers: { accept: 'application/json, text/event-stream', [r.name]: value }, body: undefined };
          const res = await exchange(property, req);
          counter.note(property, `${r.method} ${res.status}`);
          check(property, req, res, undefined);
          await healthCheck(1, property);
        },
      ),
      fuzzParams(RUNS.oversizedHeaders),
    );
  });
});
