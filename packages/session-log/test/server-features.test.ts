import { describe, expect, it } from 'vitest';
import { assertSupportedServer, isSessionLogError, isSupportedServer, MIN_SERVER_VERSION, serverFeatures } from '@tether/session-log';

describe('the server floor (2.11)', () => {
  it('accepts 2.11.0 and every later release, refuses everything older', () => {
    expect(MIN_SERVER_VERSION).toBe('2.11.0');
    for (const v of ['2.11.0', '2.11.3', '2.12.1', '2.15.1', 'v2.11.3-beta.1', '3.0.0']) expect(isSupportedServer(v), v).toBe(true);
    for (const v of ['2.9.10', '2.9.25', '2.10.29', '1.99.99']) expect(isSupportedServer(v), v).toBe(false);
  });

  it('an unreadable version is refused, never guessed', () => {
    for (const v of [undefined, '', 'dev', '2.x']) expect(isSupportedServer(v)).toBe(false);
  });

  it('the refusal names the version found, what the log needs, and the way to a current server', () => {
    let err: unknown;
    try {
      assertSupportedServer('2.9.10', 'the NATS server at 127.0.0.1:4222');
    } catch (caught) {
      err = caught;
    }
    expect(isSessionLogError(err, 'unsupported_server')).toBe(true);
    const message = (err as Error).message;
    expect(message).toContain('127.0.0.1:4222 is nats-server 2.9.10');
    expect(message).toContain('2.11.0 or newer');
    expect(message).toContain('batch direct get');
    expect(message).toContain('scripts/nats-server.sh current');
    expect(() => assertSupportedServer('2.15.1')).not.toThrow();
  });

  it('reports what a newer server adds without using it', () => {
    expect(serverFeatures('2.11.0')).toEqual({ version: '2.11.0', atomicBatchPublish: false });
    expect(serverFeatures('2.12.1').atomicBatchPublish).toBe(true);
    expect(serverFeatures('dev').version).toBe('unknown');
  });
});
