import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { isSessionLogError, SessionLog, principalDigest } from '@tether/session-log';
import type { CreateSessionLogOptions, LogEvent, ResumeResult, SessionLogOptions } from '@tether/session-log';

export const ALICE = principalDigest('Bearer alice');
export const MALLORY = principalDigest('Bearer mallory');
export const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
export const text = (data: Uint8Array): string => new TextDecoder().decode(data);

let counter = 0;
/** A unique, valid stream name and subject prefix per log, so tests sharing a server never see each other. */
export function isolatedNames(): Pick<SessionLogOptions, 'streamName' | 'subjectPrefix' | 'sessionsBucket' | 'leasesBucket' | 'principalsBucket'> {
  counter += 1;
  const tag = `t${process.pid}_${counter}`;
  return { streamName: `LOG_${tag}`, subjectPrefix: `tt.${tag}`, sessionsBucket: `sessions_${tag}`, leasesBucket: `leases_${tag}`, principalsBucket: `principals_${tag}` };
}

/** One real nats-server per test file, plus helpers that open isolated logs on it. */
export interface LogFixture {
  readonly server: NatsServer;
  open(options?: Omit<CreateSessionLogOptions, 'servers' | 'nc'>): Promise<SessionLog>;
  /** A separate raw connection, for tests that publish or inspect directly. */
  raw(): Promise<NatsConnection>;
  teardown(): Promise<void>;
}

export async function startLogFixture(): Promise<LogFixture> {
  const server = await startNatsServer();
  const logs: SessionLog[] = [];
  const conns: NatsConnection[] = [];
  return {
    server,
    async open(options = {}) {
      const log = await SessionLog.create({ servers: server.url, ...isolatedNames(), ...options });
      logs.push(log);
      return log;
    },
    async raw() {
      const nc = await connect({ servers: server.url });
      conns.push(nc);
      return nc;
    },
    async teardown() {
      for (const log of logs) await log.close();
      for (const nc of conns) await nc.close().catch(() => undefined);
      await server.cleanup();
    },
  };
}

/** Collects events from an iterator until `count` arrived or it ended. */
export async function take<T>(iterable: AsyncIterable<T>, count: number): Promise<T[]> {
  const out: T[] = [];
  if (count <= 0) return out;
  for await (const item of iterable) {
    out.push(item);
    if (out.length >= count) break;
  }
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `attempt()` again every 500 ms while it fails `log_unavailable`, up to
 * `timeoutMs`. For setup on a cluster just started: right after an R3
 * stream is created, its leader is still being elected, or its interest has
 * not yet reached the other servers ("no responders"), which the library
 * answers `log_unavailable` as a client would get it (seen on a loaded
 * 2-core machine). Any other error, or the last one, is thrown.
 */
export async function whileUnavailable<T>(attempt: () => Promise<T>, timeoutMs = 30_000): Promise<T> {
  for (const startedAt = Date.now(); ; await sleep(500)) {
    try {
      return await attempt();
    } catch (err) {
      if (!isSessionLogError(err, 'log_unavailable') || Date.now() - startedAt > timeoutMs) throw err;
    }
  }
}

/** Every event of an accepted resume, to its end; any other verdict fails with its reason. */
export async function drainResume(result: ResumeResult): Promise<LogEvent[]> {
  if (result.verdict !== 'resumed') throw new Error(`expected resumed, got ${result.verdict}: ${result.reason}`);
  const out: LogEvent[] = [];
  for await (const event of result.events()) out.push(event);
  return out;
}
