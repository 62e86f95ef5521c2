import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createResumeGuard } from '@tether/resume-guard';
import type { ReinitializeEvent, ResumeGuardOptions, ResumeViolationError } from '@tether/resume-guard';
import { runProbe } from '@tether/probe';
import type { ProbeReport } from '@tether/probe';
import { createCutter } from './cut.js';
import { startRoundRobin } from './round-robin.js';

/** Options of `runGuardedResume`. */
export interface GuardedRunOptions {
  /** The endpoint (or a balancer in front of several instances). */
  readonly url: string;
  /** Tool to call. Default `count` (every zoo server has it). */
  readonly tool?: string;
  /** Its arguments. Default `{ n: 30, intervalMs: 15 }`. */
  readonly args?: Record<string, unknown>;
  /** The tool stream is cut after this many events (the priming event counts). Default 3. */
  readonly cutAfterEvents?: number;
  /** Extra guard options (hooks are wrapped, not replaced). */
  readonly guard?: Omit<ResumeGuardOptions, 'fetch'>;
  /** Deadline of the tool call. Default 10 000 ms. */
  readonly timeoutMs?: number;
}

/** What the official SDK client, behind the guard, went through. */
export interface GuardedRun {
  /** The tool's text result, if the call succeeded. */
  readonly result: string | undefined;
  /** The call's error, if it failed. */
  readonly error: Error | undefined;
  /** Progress values the client received, in order. */
  readonly progress: readonly number[];
  readonly violations: readonly ResumeViolationError[];
  readonly reinitializations: readonly ReinitializeEvent[];
  /** Streams the zoo's cutter broke (1 when the scenario ran as meant). */
  readonly cuts: number;
  /** A `tools/list` after the call succeeded (on the new session, if one was opened). */
  readonly usableAfterwards: boolean;
}

/**
 * Runs the official SDK client (`StreamableHTTPClientTransport`, unmodified)
 * through `createResumeGuard`, with a cutter below the guard that drops the
 * tool's stream like a proxy would. The SDK reconnects by itself with
 * `Last-Event-ID`; the guard checks what comes back.
 */
export async function runGuardedResume(options: GuardedRunOptions): Promise<GuardedRun> {
  const violations: ResumeViolationError[] = [];
  const reinitializations: ReinitializeEvent[] = [];
  const progress: number[] = [];
  const cutter = createCutter(options.cutAfterEvents ?? 3);
  const guard = createResumeGuard({
    ...options.guard,
    fetch: cutter.fetch,
    onViolation: (err) => {
      violations.push(err);
      options.guard?.onViolation?.(err);
    },
    onReinitialize: (e) => {
      reinitializations.push(e);
      options.guard?.onReinitialize?.(e);
    },
  });
  const client = new Client({ name: 'zoo-guarded-client', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(options.url), {
    fetch: guard.fetch,
    reconnectionOptions: { initialReconnectionDelay: 50, maxReconnectionDelay: 200, reconnectionDelayGrowFactor: 1, maxRetries: 3 },
  });
  // Reconnection chatter (a cut stream, a refused resume) is expected here.
  transport.onerror = () => undefined;
  let result: string | undefined;
  let error: Error | undefined;
  let usableAfterwards = false;
  await client.connect(transport);
  try {
    try {
      const r = await client.callTool({ name: options.tool ?? 'count', arguments: options.args ?? { n: 30, intervalMs: 15 } }, undefined, {
        onprogress: (p) => void progress.push(p.progress),
        timeout: options.timeoutMs ?? 10_000,
      });
      const first = (r.content as Array<{ type: string; text?: string }> | undefined)?.[0];
      result = first?.text;
    } catch (err) {
      error = err instanceof Error ? err : new Error(String(err));
    }
    try {
      await client.listTools(undefined, { timeout: 5_000 });
      usableAfterwards = true;
    } catch {
      usableAfterwards = false;
    }
  } finally {
    await client.close();
  }
  return { result, error, progress, violations, reinitializations, cuts: cutter.cuts, usableAfterwards };
}

/** Everything wrong with a run that should have been accepted; empty when it was. */
export function acceptanceProblems(run: GuardedRun, expectedProgress: number): string[] {
  const problems: string[] = [];
  if (run.cuts !== 1) problems.push(`expected the stream to be cut once, it was cut ${run.cuts} time(s)`);
  for (const v of run.violations) problems.push(`guard violation ${v.code}: ${v.message}`);
  if (run.error !== undefined) problems.push(`tools/call failed: ${run.error.message}`);
  const want = Array.from({ length: expectedProgress }, (_, i) => i + 1);
  if (run.progress.join(',') !== want.join(',')) problems.push(`progress was [${run.progress.join(',')}], expected 1..${expectedProgress} once each`);
  if (!run.usableAfterwards) problems.push('the session was not usable after the call');
  return problems;
}

/**
 * The cross-instance acceptance check, for any deployment with two
 * instances behind which sessions should survive: the SDK client through the
 * guard behind a strict round-robin over `urls` (so the resume lands on the
 * other instance), and the probe initializing on `urls[0]` and resuming on
 * `urls[1]`. Tether's gateway must pass it:
 *
 *   const r = await checkResumeAcrossInstances({ urls: [gatewayA.url, gatewayB.url] });
 *   expect(r.problems).toEqual([]);
 *
 * (with the zoo's SDK server, `startSdkServer()`, as the upstream: it has the
 * `count` tool).
 */
export async function checkResumeAcrossInstances(options: {
  readonly urls: readonly [string, string];
  readonly tool?: string;
  readonly n?: number;
}): Promise<{ readonly guarded: GuardedRun; readonly probe: ProbeReport; readonly problems: string[] }> {
  const n = options.n ?? 30;
  const args = { n, intervalMs: 15 };
  const balancer = await startRoundRobin(options.urls);
  let guarded: GuardedRun;
  try {
    guarded = await runGuardedResume({ url: balancer.url, args, ...(options.tool === undefined ? {} : { tool: options.tool }) });
  } finally {
    await balancer.close();
  }
  const probe = await runProbe({ url: options.urls[0], via: options.urls[1], tool: options.tool ?? 'count', args });
  const problems = acceptanceProblems(guarded, n);
  if (probe.classification !== 'correct') problems.push(`probe: ${probe.classification}: ${probe.detail}`);
  return { guarded, probe, problems };
}
