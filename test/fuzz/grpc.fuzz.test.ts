import fc from 'fast-check';
import { resumeVerdictSpelling } from '@tether/cursor-proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CaseCounter, FUZZ_SEED, fuzzParams } from './fuzz-kit.js';
import { answerText, detailProblems, failureProblems, leakProblems, outcomeProblems, report, statusName } from './grpc-checks.js';
import { rawRequest, typedRequest } from './grpc-arbitraries.js';
import type { Ref } from './grpc-arbitraries.js';
import { startGrpcStack } from './grpc-stack.js';
import type { Caller, CallOutcome, GrpcStack, RpcName, SeededLog } from './grpc-stack.js';
import { cursorRecipe, deriveCursor } from './http-arbitraries.js';

/**
 * Fuzzing the running tether-session-log service (issue 7): fast-check
 * requests for every RPC of the cursor API against the real process (built
 * dist) on a real nats-server, with two callers (tokens `fuzz` and `other`).
 *
 * - typed: every RPC with random field values (empty, oversized, Unicode
 *   and control characters, ids one character off, limits ±1, unknown enum
 *   values, random payloads), encoded by the generated stubs;
 * - raw: request bytes written by hand (uint64 past 2^53, negative varints,
 *   wrong wire types, bad lengths, random bytes);
 * - cross-session: sessions A and B (same caller, same principal) hold
 *   marked events; every read as B with cursors, streams and positions
 *   taken from A (and mutated), and the reverse, must not return A's data.
 *
 * Claims, each its own property so that one finding does not stop the
 * others: every call answers within 20 s (ANSWER_MS, a hang bound; the slowest answer is printed) with messages that decode, and no
 * answer holds another session's data (typed, cross-session); every failure
 * is a client-error status with an ErrorDetail that the stubs decode and
 * that matches it in cursor.proto's tables (typed-errors, raw-details,
 * cross-session); any bytes get a status and leave the service SERVING
 * (raw-robust). After each batch the process is alive and SERVING, and at
 * the end it stops promptly (no call left open).
 *
 * Seed: TETHER_FUZZ_SEED (printed); scale: TETHER_FUZZ_RUNS.
 */

const RUNS = { typed: 400, typedErrors: 200, rawRobust: 200, rawDetails: 100, crossSession: 300 } as const;
const HEALTH_EVERY = 10;
const PRINCIPAL = 'fuzz-user';

const counter = new CaseCounter();
const started = performance.now();
let stack: GrpcStack;
/** Sessions the typed property names (it may close them: then they are replaced). */
const scratch: SeededLog[] = [];
/** A and B: only read, never written or closed, by the cross-session property. */
const pair: SeededLog[] = [];
const seeded: SeededLog[] = [];

beforeAll(async () => {
  console.log(`grpc fuzz: seed ${FUZZ_SEED} (TETHER_FUZZ_SEED to change it)`);
  stack = await startGrpcStack();
  for (const list of [pair, pair, scratch, scratch]) {
    const s = await stack.seed(PRINCIPAL);
    list.push(s);
    seeded.push(s);
  }
});

afterAll(async () => {
  const stopped = await stack?.stop();
  console.log(counter.summary('grpc', performance.now() - started));
  expect(stopped?.code).toBe(0);
  // Every client call ended: a SIGTERM stops at once. A stream the service
  // left open (cancelled but not released) holds it for its 5 s grace.
  expect(stopped?.tookMs).toBeLessThan(4_500);
});

function warnings(): string[] {
  return stack.service.stdoutLines.filter((l) => /"level":(4|5|6)0/.test(l)).slice(-8);
}

async function healthCheck(every: number, property: string): Promise<void> {
  if (counter.count(property) % every !== 0) return;
  const health = await stack.healthy();
  if (!health.ok) throw new Error(`after ${counter.count(property)} cases of ${property}: ${health.why}\nstderr:\n${stack.service.stderrLines.slice(-20).join('\n')}`);
}

function isRef(value: unknown): value is Ref {
  return typeof value === 'object' && value !== null && '$ref' in value;
}

/** Replaces references to live sessions by their current ids, streams and event ids. */
function resolve(value: unknown, slots: readonly SeededLog[]): unknown {
  if (isRef(value)) {
    const s = slots[value.slot % slots.length]!;
    switch (value.$ref) {
      case 'session':
        return value.flip === undefined ? s.sessionId : `${s.sessionId.slice(0, value.flip.index)}${value.flip.char}${s.sessionId.slice(value.flip.index + 1)}`;
      case 'stream':
        return s.streams[value.pick % s.streams.length]!;
      case 'event-id': {
        const id = s.ids[value.pick % s.ids.length]!;
        return value.cut === 0 ? id : id.slice(0, -value.cut);
      }
    }
  }
  if (value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.map((v) => resolve(v, slots));
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v, slots)]));
  return value;
}

function note(property: string, rpc: RpcName, outcome: CallOutcome): void {
  counter.time(property, outcome.elapsedMs);
  if (outcome.t === 'failed') {
    const d = outcome.failure.detail;
    const verdict = d?.code === 'resume_refused' ? `/${resumeVerdictSpelling(d.verdict) ?? d.verdict}` : '';
    counter.note(property, `${rpc} ${statusName(outcome.failure.code).replace(/\(\d+\)/, '')} ${d?.code ?? '-'}${verdict}`);
  } else counter.note(property, `${rpc} ${outcome.t === 'ok' ? 'OK' : 'NO-ANSWER'}`);
}

/** What the request sent, as text, to tell an echo from a leak. */
function sentText(request: unknown): string {
  return JSON.stringify(request, (_k, v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v)) ?? '';
}

const callerArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant<Caller>('fuzz') },
  { weight: 1, arbitrary: fc.constant<Caller>('other') },
  { weight: 1, arbitrary: fc.constantFrom<Caller>('none', 'wrong') },
);

describe('tether-session-log under fuzzed requests', () => {
  it('answers every RPC with any field values in time, with messages that decode, never with another session\'s data', async () => {
    const property = 'grpc-typed';
    await fc.assert(
      fc.asyncProperty(typedRequest(2), callerArb, async ({ rpc, request }, caller) => {
        counter.hit(property);
        const resolved = resolve(request, scratch) as Record<string, unknown>;
        const outcome = await stack.callTyped(rpc, resolved, caller);
        note(property, rpc, outcome);
        const { text, problems: decodeProblems } = answerText(stack, rpc, outcome);
        const sent = sentText(resolved);
        const owned = caller === 'fuzz' ? seeded.filter((s) => sent.includes(s.sessionId)) : [];
        const lastEventId = typeof resolved['lastEventId'] === 'string' ? resolved['lastEventId'] : undefined;
        const problems = [...decodeProblems, ...(outcome.t === 'no-answer' ? [`no answer: ${outcome.why}`] : []), ...leakProblems(text, sent, lastEventId, owned, seeded)];
        if (problems.length > 0) throw new Error(report(property, rpc, caller, resolved, outcome, text, problems, warnings()));
        if (rpc === 'closeSession') await refreshScratch();
        await healthCheck(HEALTH_EVERY, property);
      }),
      fuzzParams(RUNS.typed),
    );
    expect((await stack.healthy()).ok).toBe(true);
  });

  // The same inputs, the error contract: kept apart so that an error-contract
  // finding does not stop the robustness and isolation property above from
  // running all its cases.
  it('answers a client\'s bad input with a client-error status and an ErrorDetail that decodes and matches it, never a server error (INTERNAL, DATA_LOSS…)', async () => {
    const property = 'grpc-typed-errors';
    await fc.assert(
      fc.asyncProperty(typedRequest(2), callerArb, async ({ rpc, request }, caller) => {
        counter.hit(property);
        const resolved = resolve(request, scratch) as Record<string, unknown>;
        const outcome = await stack.callTyped(rpc, resolved, caller);
        note(property, rpc, outcome);
        const { text, decoded } = answerText(stack, rpc, outcome);
        const problems = outcomeProblems(rpc, outcome, decoded, failureProblems);
        if (problems.length > 0) throw new Error(report(property, rpc, caller, resolved, outcome, text, problems, warnings()));
        if (rpc === 'closeSession') await refreshScratch();
      }),
      fuzzParams(RUNS.typedErrors),
    );
  });

  it('answers raw request bytes (huge varints, wrong wire types, bad lengths, random bytes) in time with a status, and stays SERVING', async () => {
    const property = 'grpc-raw-robust';
    await fc.assert(
      fc.asyncProperty(rawRequest, async ({ rpc, bytes, shape }) => {
        counter.hit(property);
        const outcome = await stack.call(rpc, bytes, 'fuzz');
        note(property, rpc, outcome);
        if (outcome.t === 'no-answer') throw new Error(`${property}: ${rpc} with ${bytes.toString('hex')} (${shape}): ${outcome.why}\n${warnings().join('\n')}`);
        await healthCheck(HEALTH_EVERY, property);
      }),
      fuzzParams(RUNS.rawRobust),
    );
    expect((await stack.healthy()).ok).toBe(true);
  });

  it('refuses raw request bytes it cannot decode with INVALID_ARGUMENT and an ErrorDetail, like any other bad input', async () => {
    const property = 'grpc-raw-details';
    await fc.assert(
      fc.asyncProperty(rawRequest, async ({ rpc, bytes, shape }) => {
        counter.hit(property);
        const outcome = await stack.call(rpc, bytes, 'fuzz');
        note(property, rpc, outcome);
        const problems = outcome.t === 'failed' ? failureProblems(outcome.failure.code, outcome.failure.message, outcome.failure.detail) : outcome.t === 'no-answer' ? [outcome.why] : [];
        if (problems.length > 0) {
          throw new Error(`${property}\n${problems.map((p) => `  - ${p}`).join('\n')}\nrequest: ${rpc} bytes ${bytes.toString('hex') || '(empty)'} = ${shape}`);
        }
      }),
      fuzzParams(RUNS.rawDetails),
    );
  });

  it('never returns an event of session A to a read as session B with A\'s cursors, streams and positions, mutated, or B\'s own (and vice versa)', async () => {
    const property = 'grpc-cross-session';
    const owner = fc.oneof({ weight: 4, arbitrary: fc.constant('source' as const) }, { weight: 1, arbitrary: fc.constant('victim' as const) });
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          victim: fc.nat({ max: 1 }),
          caller: fc.oneof({ weight: 9, arbitrary: fc.constant<Caller>('fuzz') }, { weight: 1, arbitrary: fc.constant<Caller>('other') }),
          principal: fc.oneof({ weight: 8, arbitrary: fc.constant(PRINCIPAL) }, { weight: 1, arbitrary: fc.constantFrom('', 'someone-else') }),
          rpc: fc.oneof(
            { weight: 5, arbitrary: fc.constant<RpcName>('resume') },
            { weight: 3, arbitrary: fc.constant<RpcName>('read') },
            { weight: 2, arbitrary: fc.constant<RpcName>('follow') },
            { weight: 2, arbitrary: fc.constant<RpcName>('head') },
            { weight: 1, arbitrary: fc.constantFrom<RpcName>('getLeaseHolder', 'getSession') },
          ),
          cursor: cursorRecipe(owner),
          stream: fc.oneof(
            { weight: 4, arbitrary: fc.record({ t: fc.constant('of' as const), owner, pick: fc.nat() }) },
            { weight: 1, arbitrary: fc.constant({ t: 'zero' as const }) },
          ),
          at: fc.record({
            owner,
            pick: fc.nat(),
            seqDelta: fc.integer({ min: -2, max: 2 }),
            posDelta: fc.oneof(fc.integer({ min: -2, max: 2 }), fc.integer({ min: -1_000, max: 1_000_000 })),
            fromStart: fc.boolean(),
            withPos: fc.boolean(),
          }),
          limit: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.constantFrom(0, 10_000, 10_001)),
        }),
        async (r) => {
          counter.hit(property);
          const victim = pair[r.victim]!;
          const source = pair[1 - r.victim]!;
          const whose = (o: 'source' | 'victim'): SeededLog => (o === 'source' ? source : victim);
          const stream = r.stream.t === 'zero' ? '0' : whose(r.stream.owner).streams[r.stream.pick % 3]!;
          const [, , seqText, posText] = whose(r.at.owner).ids[r.at.pick % whose(r.at.owner).ids.length]!.split('-');
          const afterSeq = r.at.fromStart ? 0 : Math.max(0, Number(seqText) + r.at.seqDelta);
          const afterPos = r.at.fromStart ? 0 : Math.max(0, Number(posText) + r.at.posDelta);
          const requests: Record<string, () => Record<string, unknown>> = {
            resume: () => ({ sessionId: victim.sessionId, lastEventId: deriveCursor(r.cursor, { victim, source }), principal: r.principal }),
            read: () => ({ sessionId: victim.sessionId, stream, afterSeq, limit: r.limit, ...(r.at.withPos ? { afterPos } : {}) }),
            follow: () => ({ sessionId: victim.sessionId, stream, afterSeq, afterPos }),
            head: () => ({ sessionId: victim.sessionId, stream }),
            getLeaseHolder: () => ({ sessionId: victim.sessionId, stream }),
            getSession: () => ({ sessionId: victim.sessionId, principal: r.principal }),
          };
          const request = requests[r.rpc]!();
          const outcome = await stack.callTyped(r.rpc, request, r.caller);
          note(property, r.rpc, outcome);
          const { text, problems: decodeProblems, decoded } = answerText(stack, r.rpc, outcome);
          // The victim's own data is fine for its owner: its caller and, where checked (Resume, GetSession), its principal.
          const isOwner = r.caller === 'fuzz' && ((r.rpc !== 'resume' && r.rpc !== 'getSession') || r.principal === victim.principal);
          const lastEventId = typeof request['lastEventId'] === 'string' ? request['lastEventId'] : undefined;
          const problems = [...decodeProblems, ...outcomeProblems(r.rpc, outcome, decoded, detailProblems), ...leakProblems(text, sentText(request), lastEventId, isOwner ? [victim] : [], seeded)];
          if (problems.length > 0) throw new Error(report(property, r.rpc, r.caller, request, outcome, text, problems, warnings()));
          await healthCheck(HEALTH_EVERY, property);
        },
      ),
      fuzzParams(RUNS.crossSession),
    );
    expect((await stack.healthy()).ok).toBe(true);
    // Not vacuous: A's cursors reached the epoch check as B, and some reads as the owner returned events.
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    expect(outcomes).toMatch(/resume FAILED_PRECONDITION resume_refused\/epoch_mismatch/);
    expect(outcomes).toMatch(/resume OK/);
    expect(outcomes).toMatch(/read OK/);
  });
});

/** The typed property may close a scratch session (CloseSession): replace it so later cases name a live one. */
async function refreshScratch(): Promise<void> {
  for (const [i, s] of scratch.entries()) {
    const outcome = await stack.callTyped('getSession', { sessionId: s.sessionId, principal: s.principal }, 'fuzz');
    if (outcome.t === 'ok') continue;
    if (outcome.t === 'failed' && outcome.failure.detail?.code === 'session_not_found') {
      const fresh = await stack.seed(PRINCIPAL);
      scratch[i] = fresh;
      seeded.push(fresh);
      continue;
    }
    throw new Error(`liveness check of scratch session ${s.sessionId}: ${JSON.stringify(outcome)}`);
  }
}
