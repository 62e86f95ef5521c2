import { describe, expect, it } from 'vitest';
import { ConfigError, helpText, parseConfig, printableConfig } from '@tether/session-log-service';

const refused = (argv: string[], env: Record<string, string> = {}, read?: (path: string) => string): string => {
  try {
    parseConfig(argv, env, read);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`expected ${JSON.stringify(argv)} to be refused`);
};

describe('tether-session-log --namespace', () => {
  it('no namespace: the log options are today\'s, with no namespace key', () => {
    const { log } = parseConfig([], {}).options;
    expect(log).toMatchObject({ streamName: 'TETHER_LOG', subjectPrefix: 'tether' });
    expect(log).not.toHaveProperty('namespace');
    expect(parseConfig(['--log-stream', 'TETHER_LOG', '--log-subject-prefix', 'tether'], {}).options.log).toEqual(log);
  });

  it('a namespace derives the stream and subjects, and reaches the library (which derives the buckets)', () => {
    expect(parseConfig(['--namespace', 'staging'], {}).options.log).toMatchObject({ namespace: 'staging', streamName: 'TETHER_LOG_staging', subjectPrefix: 'tether_staging' });
    expect(parseConfig([], { TETHER_NAMESPACE: 'b2' }).options.log).toMatchObject({ namespace: 'b2', streamName: 'TETHER_LOG_b2' });
    expect(parseConfig(['--config', '/c.json'], {}, () => '{"namespace": "t1"}').options.log).toMatchObject({ namespace: 't1' });
    expect(parseConfig(['--namespace', 'a', '--log-stream', 'MINE', '--log-subject-prefix', 'mine.a'], {}).options.log).toMatchObject({ namespace: 'a', streamName: 'MINE', subjectPrefix: 'mine.a' });
    expect(JSON.parse(printableConfig(parseConfig(['--namespace', 'staging'], {})))).toMatchObject({ log: { namespace: 'staging', streamName: 'TETHER_LOG_staging' } });
  });

  it('refuses --log-stream or --log-subject-prefix on its own with what to use instead', () => {
    for (const message of [refused(['--log-stream', 'STAGING']), refused([], { TETHER_LOG_STREAM: 'STAGING' }), refused(['--config', '/c.json'], {}, () => '{"log-stream": "STAGING"}')]) {
      expect(message).toMatch(/^--log-stream "STAGING" needs --namespace: on its own it renames only the stream/);
      expect(message).toContain('Give --namespace staging (TETHER_NAMESPACE) instead');
    }
    expect(refused(['--log-subject-prefix', 'other'])).toMatch(/^--log-subject-prefix "other" needs --namespace: on its own it moves only the subjects/);
    expect(refused(['--log-subject-prefix', 'a.b'])).toContain('Give --namespace a_b');
    expect(refused(['--log-stream', 'a.b'])).toMatch(/invalid --log-stream "a.b"; allowed: letters, digits, _ and -/);
  });

  it.each([['Staging'], ['-a'], ['a.b'], ['a b'], ['x'.repeat(33)]])('refuses --namespace %j naming the flag, the value and what is allowed', (name) => {
    expect(refused(['--namespace', name])).toBe(`invalid --namespace ${JSON.stringify(name)}; allowed: 1 to 32 lowercase letters, digits, _ and -, starting with a letter or digit`);
    expect(refused([], { TETHER_NAMESPACE: name })).toContain(`invalid --namespace ${JSON.stringify(name)}`);
  });

  it('--help lists --namespace and its env twin', () => {
    expect(helpText()).toMatch(/--namespace\s+TETHER_NAMESPACE\s+separates deployments on one NATS account/);
  });
});
