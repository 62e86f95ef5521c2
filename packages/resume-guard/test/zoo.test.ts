import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { RESUME_VIOLATION_RPC_CODE, createResumeGuard, isResumeViolation } from '@tether/resume-guard';
import type { ReinitializeEvent } from '@tether/resume-guard';
import {
  GapAfterEvictionServer,
  ReplayAfterRestartServer,
  SeamGapServer,
  SilentFallbackServer,
  TetherLikeServer,
  acceptanceProblems,
  createCutter,
  runGuardedResume,
  startLazyForkPair,
  startRoundRobin,
  startSdkServer,
} from '../../probe/test/zoo/index.js';
import type { GuardedRun, MiniMcpServer, ZooHandle } from '../../probe/test/zoo/index.js';

// The official SDK client, unmodified, behind the guard; a cutter under the
// guard drops the tool's stream after 3 events with ids (priming, progress 1
// and 2), and the SDK reconnects with Last-Event-ID by itself.

const open: ZooHandle[] = [];
const keep = <T extends ZooHandle>(h: T): T => {
  open.push(h);
  return h;
};
afterEach(async () => {
  await Promise.all(open.splice(0).map((h) => h.close()));
});

/** What every refused resume must look like from the client's side. */
function expectRefused(run: GuardedRun, code: string): void {
  expect(run.cuts).toBe(1);
  expect(run.violations.map((v) => v.code)).toEqual([code]);
  // The pending call fails at once with the guard's error, not a 60 s timeout.
  expect(run.error?.message).toContain(`MCP error ${RESUME_VIOLATION_RPC_CODE}: ${code}`);
  // Nothing from the broken stream reached the client: progress is 1, 2 and stops.
  expect(run.progress).toEqual([1, 2]);
  // A new session was opened, and the client can go on with it.
  expect(run.reinitializations).toHaveLength(1);
  expect(run.reinitializations[0]).toMatchObject({ reason: 'violation' });
  expect(run.usableAfterwards).toBe(true);
}

describe('the guard accepts correct servers', () => {
  it('accepts the official SDK server with InMemoryEventStore', async () => {
    const server = keep(await startSdkServer());
    const run = await runGuardedResume({ url: server.url });
    expect(acceptanceProblems(run, 30)).toEqual([]);
  });

  it('leaves a server without ids alone: not resumable is not a violation', async () => {
    const server = keep(await startSdkServer({ eventStore: false }));
    const run = await runGuardedResume({ url: server.url, timeoutMs: 500 });
    expect(run.violations).toEqual([]);
    // Without a priming event the SDK does not reconnect: the call is lost, visibly.
    expect(run.error?.message).toContain('timed out');
    expect(run.usableAfterwards).toBe(true);
  });

  it('accepts a server with Tether event ids, Tether-Resume: resumed and the resume acknowledgment (event: resume)', async () => {
    const server = keep(await new TetherLikeServer('correct').start());
    const run = await runGuardedResume({ url: server.url });
    expect(acceptanceProblems(run, 30)).toEqual([]);
  });
});

describe('the guard names each failure of DESIGN §1 before the client sees it', () => {
  it('replay from zero after a restart', async () => {
    const server = keep(await new ReplayAfterRestartServer().start());
    const run = await runGuardedResume({ url: server.url });
    expectRefused(run, 'replay_from_zero');
    expect(run.violations[0]).toMatchObject({ lastEventId: '3', eventId: '1', position: 'first' });
  });

  it('gap-skipping resume after eviction', async () => {
    const server = keep(await new GapAfterEvictionServer().start());
    const run = await runGuardedResume({ url: server.url });
    expectRefused(run, 'gap');
    const v = run.violations[0];
    expect(v).toMatchObject({ lastEventId: '3', expectedEventId: '4', position: 'first' });
    expect(Number(v?.eventId)).toBeGreaterThan(4);
  });

  it('buffer/log seam gap inside the resumed stream', async () => {
    const server = keep(await new SeamGapServer().start());
    const run = await runGuardedResume({ url: server.url });
    expectRefused(run, 'gap');
    expect(run.violations[0]).toMatchObject({ lastEventId: '3', position: 'within' });
  });

  it('lazy fork on a second process behind a round-robin balancer', async () => {
    const [a, b] = await startLazyForkPair();
    keep(a);
    keep(b);
    const balancer = keep({ name: 'round-robin', ...(await startRoundRobin([a.url, b.url])) });
    const run = await runGuardedResume({ url: balancer.url });
    expectRefused(run, 'fork');
    expect(run.violations[0]).toMatchObject({ lastEventId: '3', eventId: '2' });
  });

  it('silent fallback to id-less SSE', async () => {
    const server = keep(await new SilentFallbackServer().start());
    const run = await runGuardedResume({ url: server.url });
    expectRefused(run, 'silent_fallback');
    expect(run.violations[0]).toMatchObject({ lastEventId: '3', eventId: undefined });
  });

  it('a bare repeat of the cursor where the acknowledgment belongs: a replay', async () => {
    const server = keep(await new TetherLikeServer('echo').start());
    const run = await runGuardedResume({ url: server.url });
    expectRefused(run, 'replay_from_zero');
    const v = run.violations[0];
    expect(v).toMatchObject({ position: 'first' });
    expect(v?.eventId).toBe(v?.lastEventId);
  });

  it('a malformed resume acknowledgment, with what is wrong with it', async () => {
    const server = keep(await new TetherLikeServer('malformed_ack').start());
    const run = await runGuardedResume({ url: server.url });
    expectRefused(run, 'malformed_ack');
    expect(run.violations[0]?.message).toContain('resume ack has no next_seq');
  });

  it('an explicit refusal, with its Tether-Resume verdict', async () => {
    const server = keep(await new TetherLikeServer('refuse').start());
    const run = await runGuardedResume({ url: server.url });
    expectRefused(run, 'explicit_refusal');
    expect(run.violations[0]).toMatchObject({ verdict: 'truncated', status: 404 });
  });

  it('reports without re-initializing when autoReinitialize is off', async () => {
    const server = keep(await new GapAfterEvictionServer().start());
    const run = await runGuardedResume({ url: server.url, guard: { autoReinitialize: false } });
    expect(run.violations.map((v) => v.code)).toEqual(['gap']);
    expect(isResumeViolation(run.violations[0], 'gap')).toBe(true);
    expect(run.error?.message).toContain('gap');
    expect(run.reinitializations).toEqual([]);
  });
});

describe('a lost session', () => {
  it('is re-initialized on a 404 instead of failing forever', async () => {
    const server = keep(await new TetherLikeServer('correct').start());
    const reinits: ReinitializeEvent[] = [];
    const guard = createResumeGuard({ onReinitialize: (e) => void reinits.push(e) });
    const client = new Client({ name: 'zoo-client', version: '0.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(server.url), { fetch: guard.fetch });
    transport.onerror = () => undefined;
    await client.connect(transport);
    const first = transport.sessionId as string;
    // The server forgets the session (a restart, an idle timeout, a terminated session).
    server.backend.sessions.clear();
    await expect(client.listTools()).resolves.toMatchObject({ tools: [{ name: 'count' }] });
    expect(reinits).toEqual([{ previousSessionId: first, sessionId: expect.any(String), reason: 'session_not_found' }]);
    // The SDK adopted the new session from the retried answer.
    expect(transport.sessionId).toBe(reinits[0]?.sessionId);
    expect(guard.currentSessionId(first)).toBe(transport.sessionId);
    await client.close();
  });
});

describe('SDK resumption tokens', () => {
  /**
   * A client is cut and does not reconnect (maxRetries 0), keeping the last
   * resumption token; a new client process, with a new guard that never saw
   * the stream, resumes the request with the token (`Client.request` with
   * `resumptionToken`, session id passed to the transport).
   */
  async function resumeInNewProcess(server: MiniMcpServer) {
    const cutter = createCutter(3);
    const tokens: string[] = [];
    const first = new Client({ name: 'zoo-client', version: '0.0.0' });
    const t1 = new StreamableHTTPClientTransport(new URL(server.url), {
      fetch: createResumeGuard({ fetch: cutter.fetch }).fetch,
      reconnectionOptions: { initialReconnectionDelay: 50, maxReconnectionDelay: 50, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
    });
    t1.onerror = () => undefined;
    await first.connect(t1);
    const pending = first
      .request({ method: 'tools/call', params: { name: 'count', arguments: { n: 20 } } }, CallToolResultSchema, {
        onresumptiontoken: (t) => void tokens.push(t),
        timeout: 1_000,
      })
      .catch(() => undefined);
    while (cutter.cuts === 0) await new Promise((r) => setTimeout(r, 10));
    const sessionId = t1.sessionId as string;
    await new Promise((r) => setTimeout(r, 150)); // the server moves on meanwhile

    const violations: string[] = [];
    const second = new Client({ name: 'zoo-client', version: '0.0.0' });
    const t2 = new StreamableHTTPClientTransport(new URL(server.url), {
      sessionId,
      fetch: createResumeGuard({ autoReinitialize: false, onViolation: (e) => void violations.push(e.code) }).fetch,
    });
    t2.onerror = () => undefined;
    await second.connect(t2); // a transport with a session id skips initialize
    const result = await second
      .request({ method: 'tools/call', params: { name: 'count', arguments: { n: 20 } } }, CallToolResultSchema, {
        resumptionToken: tokens.at(-1) as string,
        timeout: 1_000,
      })
      .then((r) => (r.content[0] as { text: string }).text)
      .catch((e: unknown) => (e instanceof Error ? e.message : String(e)));
    await pending;
    await Promise.all([first.close(), second.close()]);
    return { result, violations, token: tokens.at(-1) };
  }

  it('are resumed and accepted when the continuation is correct', async () => {
    const run = await resumeInNewProcess(keep(await new TetherLikeServer('correct').start()));
    expect(run).toMatchObject({ result: 'counted 20', violations: [] });
  });

  it('are checked against the token alone by a guard that never saw the stream', async () => {
    const run = await resumeInNewProcess(keep(await new GapAfterEvictionServer().start()));
    expect(run.token).toBe('3');
    expect(run.violations).toEqual(['gap']);
    // The guard cannot know the request id of a GET it never saw the POST of,
    // so the body errors and the SDK's request runs into its timeout.
    expect(run.result).toContain('timed out');
  });
});
