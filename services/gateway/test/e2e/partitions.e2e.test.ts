import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { SseMessage } from '@tether/protocol';
import { createSubjects, logLayout, namespaceNames, partitionOf, resolveConfig } from '@tether/session-log';
import { ServiceProcessStartError, startServiceProcess, UpstreamTools } from '@tether/testing';
import { callTool, initialize, request } from './raw-client.js';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

// Two gateway processes on a log of 4 partitions (`--log-partitions 4`, given
// to whichever process owns the log: the gateways in-process, the session-log
// service with `--log grpc://`). A session recorded through one instance is
// resumed through the other; a process with another count refuses to start.
const PARTITIONS = 4;
const MODE = process.env.TETHER_E2E_LOG === 'grpc' ? 'grpc' : 'nats';
const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ gateways: 2, logSettings: ['--log-partitions', String(PARTITIONS)] });
});
afterAll(async () => {
  await stack?.teardown();
});

async function collect(messages: AsyncGenerator<SseMessage>): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  for await (const m of messages) out.push(m);
  return out;
}

describe(`a log of ${PARTITIONS} partitions`, () => {
  it('/readyz states the partition count in-process (over gRPC the service lays out the log)', async () => {
    for (const gateway of stack.gateways) {
      const lines = (await (await fetch(`${gateway.origin}/readyz`)).text()).trimEnd().split('\n');
      expect(lines[0]).toBe('ready');
      if (stack.mode === 'nats') {
        expect(lines[1]).toMatch(new RegExp(`^log: jetstream TETHER_LOG-0_${stack.namespace} … TETHER_LOG-3_${stack.namespace} via `));
        expect(lines).toContain(`partitions: ${PARTITIONS}`);
        expect(gateway.process.readyJson).toMatchObject({ partitions: PARTITIONS });
      } else {
        expect(lines.some((l) => l.startsWith('partitions:'))).toBe(false);
      }
    }
  });

  it('a session recorded through one instance is resumed through the other, whichever partition holds it', async () => {
    const [one, two] = stack.gateways;
    const held = new Set<number>();
    // Enough sessions that more than one partition holds some (8 ids over 4 partitions: all in one is 1 in 4^7).
    for (let i = 0; i < 8; i += 1) {
      const sessionId = await initialize(one!.url);
      held.add(partitionOf(sessionId, PARTITIONS));
      const post = await request(one!.url, { method: 'POST', sessionId, body: callTool(1, UpstreamTools.StreamProgress, { count: 6, delayMs: 0 }) });
      expect(post.status).toBe(200);
      const ids = (await collect(post.messages)).map((m) => m.id).filter((id): id is string => id !== undefined);
      expect(ids.length).toBeGreaterThanOrEqual(6);
      const resumed = await request(two!.url, { method: 'GET', sessionId, lastEventId: ids[2]! });
      expect(resumed.status).toBe(200);
      expect(resumed.headers.get('tether-resume')).toBe('resumed');
      const rest = (await collect(resumed.messages)).filter((m) => m.event !== 'resume' && m.data !== '').map((m) => m.id);
      expect(rest).toEqual(ids.slice(3));
      const del = await request(two!.url, { method: 'DELETE', sessionId });
      expect(del.status).toBeLessThan(300);
    }
    expect(held.size).toBeGreaterThan(1);
  });

  it('the events of a session are in the stream of its partition, and nowhere else', async () => {
    const config = resolveConfig({ namespace: stack.namespace, partitions: PARTITIONS });
    const layout = logLayout(config);
    const subjects = createSubjects(namespaceNames(stack.namespace).subjectPrefix, PARTITIONS);
    const sessionId = await initialize(stack.gateways[0]!.url);
    const post = await request(stack.gateways[0]!.url, { method: 'POST', sessionId, body: callTool(1, UpstreamTools.StreamProgress, { count: 3, delayMs: 0 }) });
    await collect(post.messages);
    const nc = await connect({ servers: stack.nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      const names: string[] = [];
      for await (const info of jsm.streams.list()) names.push(info.config.name);
      expect(names.filter((n) => n.startsWith('TETHER_LOG')).sort()).toEqual(layout.partitions.map((p) => p.streamName).sort());
      const home = layout.of(sessionId).streamName;
      for (const partition of layout.partitions) {
        const info = await jsm.streams.info(partition.streamName, { subjects_filter: subjects.sessionLogs(sessionId) });
        expect(Object.keys(info.state.subjects ?? {}).length > 0, partition.streamName).toBe(partition.streamName === home);
      }
    } finally {
      await nc.close();
    }
  });

  it.runIf(MODE === 'nats')("a gateway with another count refuses to start with the library's message, naming both counts", async () => {
    let refusal: unknown;
    try {
      const proc = await startServiceProcess({
        name: 'gateway-other-count',
        command: process.execPath,
        args: [MAIN, '--port', '0', '--nats', stack.nats.url, '--namespace', stack.namespace, '--log-partitions', '2', '--upstream', stack.upstream.url],
        readyLine: (json) => json.msg === 'listening',
      });
      await proc.kill();
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(ServiceProcessStartError);
    const failed = refusal as ServiceProcessStartError;
    expect(failed.exitCode).toBe(1);
    const fatal = failed.stdoutTail.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'failed to start');
    expect(fatal).toMatchObject({ code: 'incompatible_log' });
    expect(String(fatal?.err)).toMatch(
      new RegExp(`^the log of this deployment has ${PARTITIONS} partition\\(s\\) \\(TETHER_LOG-0_${stack.namespace}, …\\), and this process was started with --log-partitions 2\\. `),
    );
    expect(String(fatal?.err)).toContain(`Start every process with --log-partitions ${PARTITIONS}.`);
    // The message, not a stack trace.
    expect([...failed.stdoutTail, ...failed.stderrTail].join('\n')).not.toMatch(/\n\s+at /);
  });

  it.runIf(MODE === 'grpc')('a gateway on --log grpc:// given another count starts, says it ignores it, and serves the same sessions', async () => {
    const proc = await startServiceProcess({
      name: 'gateway-other-count',
      command: process.execPath,
      args: [MAIN, '--port', '0', ...stack.logFlags, '--log-partitions', '2', '--log-placement-tags', 'eu', '--upstream', stack.upstream.url],
      readyLine: (json) => json.msg === 'listening',
    });
    try {
      const warning = proc.stdoutJson.find((l) => l.level === 40);
      expect(warning).toMatchObject({ flags: ['--log-partitions', '--log-placement-tags'], msg: "log layout flags ignored with --log grpc://: the session-log service's own settings lay out the log" });
      const url = `http://127.0.0.1:${proc.port}/mcp`;
      const sessionId = await initialize(stack.gateways[0]!.url);
      const post = await request(stack.gateways[0]!.url, { method: 'POST', sessionId, body: callTool(1, UpstreamTools.StreamProgress, { count: 6, delayMs: 0 }) });
      const ids = (await collect(post.messages)).map((m) => m.id).filter((id): id is string => id !== undefined);
      const resumed = await request(url, { method: 'GET', sessionId, lastEventId: ids[2]! });
      expect(resumed.headers.get('tether-resume')).toBe('resumed');
      expect((await collect(resumed.messages)).filter((m) => m.event !== 'resume' && m.data !== '').map((m) => m.id)).toEqual(ids.slice(3));
    } finally {
      await proc.kill();
    }
  });
});
