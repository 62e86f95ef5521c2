import { afterEach, describe, expect, it } from 'vitest';
import { formatJson, isProbeError, runProbe } from '@tether/probe';
import type { ProbeReport } from '@tether/probe';
import {
  GapAfterEvictionServer,
  ReplayAfterRestartServer,
  SeamGapServer,
  SilentFallbackServer,
  TetherLikeServer,
  checkResumeAcrossInstances,
  startLazyForkPair,
  startSdkServer,
} from './zoo/index.js';
import type { ZooHandle } from './zoo/index.js';

const open: ZooHandle[] = [];
const keep = <T extends ZooHandle>(h: T): T => {
  open.push(h);
  return h;
};
afterEach(async () => {
  await Promise.all(open.splice(0).map((h) => h.close()));
});

// Set TETHER_PROBE_PRINT=1 to see each report's --json line.
function show(name: string, r: ProbeReport): ProbeReport {
  if (process.env['TETHER_PROBE_PRINT'] === '1') process.stdout.write(`${name}: ${formatJson(r)}\n`);
  return r;
}

describe('the probe accepts correct servers', () => {
  it('the official SDK server with InMemoryEventStore: correct, though it answers cursors it cannot know with a silent 200', async () => {
    const server = keep(await startSdkServer());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'correct', silent: false, tool: 'count', initialize: 'sse', idsUniqueAcrossStreams: true });
    expect(r.original).toMatchObject({ idFormat: 'opaque', priming: true, retryMs: 100 });
    expect(r.resume).toMatchObject({ status: 200, completed: true });
    // The example store replays nothing for an id it does not hold, and says nothing.
    expect(r.unknownCursor).toMatchObject({ status: 200, explicit: false });
    expect(r.malformedCursor).toMatchObject({ status: 200, explicit: false });
  });

  it('a server with Tether ids and the resume acknowledgment: correct, with explicit answers to unknown and malformed cursors', async () => {
    const server = keep(await new TetherLikeServer('correct').start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'correct', verdict: 'resumed', idsUniqueAcrossStreams: true });
    // Cut after the priming event (seq 1) and progress 1 (seq 2): acknowledged with next_seq 3, which came first.
    const cursor = r.resume?.lastEventId ?? '';
    expect(r.resume).toMatchObject({ ack: { verdict: 'resumed', stream: cursor.split('-')[1], next_seq: 3 }, completed: true });
    expect(r.resume?.firstEventId?.split('-')[2]).toBe('3');
    expect(r.detail).toMatch(/^resumed after \S+ with \S+-3-\d+ and \d+ more event\(s\), through the final response$/);
    expect(r.original).toMatchObject({ idFormat: 'tether', priming: true, retryMs: 100 });
    expect(r.unknownCursor).toMatchObject({ status: 404, verdict: 'epoch_mismatch', explicit: true });
    expect(r.malformedCursor).toMatchObject({ status: 400, verdict: 'malformed', explicit: true });
  });
});

describe('the probe names each failure of DESIGN §1', () => {
  it('replay_from_zero after a restart', async () => {
    const server = keep(await new ReplayAfterRestartServer().start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'replay_from_zero', silent: true });
    expect(r.resume).toMatchObject({ lastEventId: '2', firstEventId: '1', expectedEventId: '3' });
    // It replays its disk for any cursor, and reuses ids after the restart.
    expect(r.unknownCursor).toMatchObject({ explicit: false });
    expect(r.unknownCursor?.events).toBeGreaterThan(0);
    expect(r.idsUniqueAcrossStreams).toBe(false);
  });

  it('gap after eviction, at the first resumed event', async () => {
    const server = keep(await new GapAfterEvictionServer().start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'gap', silent: true });
    expect(r.detail).toContain('at its first event');
    expect(Number(r.resume?.firstEventId)).toBeGreaterThan(3);
  });

  it('gap at a buffer/log seam, inside the resumed stream', async () => {
    const server = keep(await new SeamGapServer().start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'gap', silent: true });
    expect(r.detail).toContain('inside it');
    expect(r.resume).toMatchObject({ firstEventId: '3' });
  });

  it('fork on a second process (--via)', async () => {
    const [a, b] = await startLazyForkPair();
    keep(a);
    keep(b);
    const r = show('zoo-lazy-fork', await runProbe({ url: a.url, via: b.url }));
    expect(r).toMatchObject({ classification: 'fork', silent: true, via: b.url });
    expect(r.resume).toMatchObject({ url: b.url, lastEventId: '2', firstEventId: '1' });
  });

  it('fallback_without_ids on the resume, and ids reused across streams', async () => {
    const server = keep(await new SilentFallbackServer().start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'fallback_without_ids', silent: true, initialize: 'json', idsUniqueAcrossStreams: false });
  });

  it('replay_from_zero when a resume repeats the cursor bare instead of acknowledging it', async () => {
    const server = keep(await new TetherLikeServer('echo').start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'replay_from_zero', silent: true });
    expect(r.resume).toMatchObject({ ack: null, firstEventId: r.resume?.lastEventId });
    expect(r.detail).toContain('event: resume');
  });

  it('malformed_ack when the acknowledgment lacks a field', async () => {
    const server = keep(await new TetherLikeServer('malformed_ack').start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'malformed_ack', silent: true });
    expect(r.detail).toContain('resume ack has no next_seq');
  });

  it('explicit_refusal, with the verdict', async () => {
    const server = keep(await new TetherLikeServer('refuse').start());
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'explicit_refusal', silent: false, verdict: 'truncated' });
    expect(r.resume).toMatchObject({ status: 404, tetherResume: 'truncated' });
  });

  it('not_resumable when the stream has no ids at all', async () => {
    const server = keep(await startSdkServer({ eventStore: false }));
    const r = show(server.name, await runProbe({ url: server.url }));
    expect(r).toMatchObject({ classification: 'not_resumable', silent: false, resume: null });
    expect(r.original).toMatchObject({ idFormat: 'none', priming: false, retryMs: null });
  });
});

describe('the cross-instance acceptance check', () => {
  it('fails a lazily forking pair, naming the fork from both the guard and the probe', async () => {
    const [a, b] = await startLazyForkPair();
    keep(a);
    keep(b);
    const { guarded, probe, problems } = await checkResumeAcrossInstances({ urls: [a.url, b.url] });
    expect(guarded.violations.map((v) => v.code)).toEqual(['fork']);
    expect(probe.classification).toBe('fork');
    expect(problems.some((p) => p.startsWith('guard violation fork'))).toBe(true);
    expect(problems.some((p) => p.startsWith('probe: fork'))).toBe(true);
  });
});

describe('when the probe cannot run', () => {
  it('says the stream finished before it could be cut', async () => {
    const server = keep(await new TetherLikeServer('correct').start());
    const err = await runProbe({ url: server.url, tool: 'count', args: { n: 1 }, cutAfterEvents: 5 }).catch((e: unknown) => e);
    expect(isProbeError(err, 'stream_too_short')).toBe(true);
  });

  it('says initialize failed when nothing listens', async () => {
    const server = await new TetherLikeServer('correct').start();
    await server.close();
    const err = await runProbe({ url: server.url }).catch((e: unknown) => e);
    expect(isProbeError(err, 'initialize_failed')).toBe(true);
  });
});
