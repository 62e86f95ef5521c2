import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createSubjects, isSessionLogError, NAMESPACE_MAX_LENGTH, namespaceNames, resolveConfig } from '@tether/session-log';

describe('namespaces', () => {
  it('no namespace keeps today\'s names exactly', () => {
    const config = resolveConfig({});
    expect(config).toMatchObject({
      namespace: '',
      streamName: 'TETHER_LOG',
      subjectPrefix: 'tether',
      sessionsBucket: 'tether_sessions',
      leasesBucket: 'tether_leases',
      principalsBucket: 'tether_principals',
    });
    expect(resolveConfig({ namespace: '' })).toEqual(config);
  });

  it('a namespace is carried by the stream, every bucket and every subject', () => {
    const config = resolveConfig({ namespace: 'staging' });
    expect(config).toMatchObject({
      namespace: 'staging',
      streamName: 'TETHER_LOG_staging',
      subjectPrefix: 'tether_staging',
      sessionsBucket: 'tether_sessions_staging',
      leasesBucket: 'tether_leases_staging',
      principalsBucket: 'tether_principals_staging',
    });
    const s = createSubjects(config.subjectPrefix);
    const subjects = [s.logWildcard, s.log('S', '0'), s.sessionLogs('S'), s.liveWildcard, s.live('S', '0'), s.control('S'), s.control('*'), s.writer('w')];
    for (const subject of subjects) expect(subject.split('.')[0]).toBe('tether_staging');
  });

  it('explicit names still win over the derived ones', () => {
    expect(resolveConfig({ namespace: 'a', streamName: 'MINE', sessionsBucket: 'my_sessions' })).toMatchObject({
      streamName: 'MINE',
      subjectPrefix: 'tether_a',
      sessionsBucket: 'my_sessions',
      leasesBucket: 'tether_leases_a',
    });
  });

  it.each([
    ['Staging', 'uppercase'],
    ['-x', 'leading -'],
    ['_x', 'leading _'],
    ['a.b', 'a dot'],
    ['a b', 'a space'],
    ['a*', 'a wildcard'],
    ['x'.repeat(NAMESPACE_MAX_LENGTH + 1), 'too long'],
  ])('refuses %j (%s) naming the key and what is allowed', (namespace) => {
    try {
      resolveConfig({ namespace });
      expect.unreachable('namespace should be refused');
    } catch (err) {
      expect(isSessionLogError(err, 'invalid_config')).toBe(true);
      expect((err as Error).message).toContain(`namespace=${JSON.stringify(namespace)}`);
      expect((err as Error).message).toContain(`allowed: 1 to ${NAMESPACE_MAX_LENGTH} lowercase letters, digits, _ and -`);
    }
  });

  it('every valid namespace gives valid names (the longest fits the 64-character limit), and two namespaces share none', () => {
    const namespace = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,31}$/);
    fc.assert(
      fc.property(namespace, namespace, (a, b) => {
        const config = resolveConfig({ namespace: a });
        expect(`KV_${config.principalsBucket}`.length).toBeLessThanOrEqual(64);
        if (a === b) return;
        const na = Object.values(namespaceNames(a));
        const nb = Object.values(namespaceNames(b));
        const none = Object.values(namespaceNames(''));
        for (const name of na) {
          expect(nb).not.toContain(name);
          expect(none).not.toContain(name);
        }
      }),
    );
    expect(() => resolveConfig({ namespace: 'z'.repeat(NAMESPACE_MAX_LENGTH) })).not.toThrow();
  });
});
