import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { SessionLog, isSessionLogError, resolveConfig } from '@tether/session-log';
import { isolatedNames, startLogFixture } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
beforeAll(async () => {
  fx = await startLogFixture();
});
afterAll(async () => {
  await fx.teardown();
});

describe('setup', () => {
  it('creates the stream with the configured limits and republish, and reopening verifies it', async () => {
    const names = isolatedNames();
    const log = await SessionLog.create({ servers: fx.server.url, ...names, maxAgeMs: 60_000, maxMsgsPerStream: 50, duplicateWindowMs: 30_000 });
    const jsm = await jetstreamManager(log.connection);
    const info = await jsm.streams.info(names.streamName!);
    expect(info.config.subjects).toEqual([`${names.subjectPrefix}.log.>`, `${names.subjectPrefix}.audit.>`]);
    expect(info.config.max_age).toBe(60_000 * 1e6);
    expect(info.config.max_msgs_per_subject).toBe(50);
    expect(info.config.duplicate_window).toBe(30_000 * 1e6);
    expect(info.config.republish).toEqual({ src: `${names.subjectPrefix}.log.>`, dest: `${names.subjectPrefix}.live.>` });
    const again = await SessionLog.create({ servers: fx.server.url, ...names, maxAgeMs: 60_000, maxMsgsPerStream: 50, duplicateWindowMs: 30_000 });
    await again.close();
    await log.close();
  });

  it('refuses an existing stream whose config differs, naming every differing key, and changes nothing', async () => {
    const names = isolatedNames();
    const log = await SessionLog.create({ servers: fx.server.url, ...names, maxAgeMs: 60_000 });
    const err = await SessionLog.create({ servers: fx.server.url, ...names, maxAgeMs: 120_000, maxMsgsPerStream: 7 }).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'incompatible_log')).toBe(true);
    expect(String((err as Error).message)).toMatch(/max_age/);
    expect(String((err as Error).message)).toMatch(/max_msgs_per_subject/);
    const jsm = await jetstreamManager(log.connection);
    expect((await jsm.streams.info(names.streamName!)).config.max_age).toBe(60_000 * 1e6);
    await log.close();
  });

  it('refuses a bucket whose idle timeout differs', async () => {
    const names = isolatedNames();
    const log = await SessionLog.create({ servers: fx.server.url, ...names, sessionIdleMs: 60_000 });
    const err = await SessionLog.create({ servers: fx.server.url, ...names, sessionIdleMs: 90_000 }).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'incompatible_log')).toBe(true);
    expect(String((err as Error).message)).toMatch(/bucket .*ttl/);
    await log.close();
  });

  it.each([
    ['streamName', { streamName: 'bad name' }],
    ['subjectPrefix', { subjectPrefix: 'a.*.b' }],
    ['replicas', { replicas: 0 }],
    ['maxMsgsPerStream', { maxMsgsPerStream: 0 }],
    ['duplicateWindowMs', { maxAgeMs: 5_000, duplicateWindowMs: 10_000 }],
    ['readBatch', { readBatch: 1.5 }],
  ])('refuses a bad %s with a message naming the key, value and what is allowed', (key, options) => {
    try {
      resolveConfig(options);
      expect.unreachable('config should be refused');
    } catch (err) {
      expect(isSessionLogError(err, 'invalid_config')).toBe(true);
      expect((err as Error).message).toContain(`${key}=`);
      expect((err as Error).message).toContain('allowed:');
    }
  });

  it('fails with log_unavailable naming the URL when NATS cannot be reached', async () => {
    const err = await SessionLog.create({ servers: 'nats://127.0.0.1:1', ...isolatedNames() }).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'log_unavailable')).toBe(true);
    expect((err as Error).message).toContain('127.0.0.1:1');
  });
});
