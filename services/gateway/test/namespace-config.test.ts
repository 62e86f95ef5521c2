import { describe, expect, it } from 'vitest';
import { ConfigError, helpText, parseConfig, printableConfig } from '@tether/gateway';

const UP = ['--upstream', 'http://a/mcp'];
const refused = (argv: string[], env: Record<string, string> = {}, read?: (path: string) => string): string => {
  try {
    parseConfig([...UP, ...argv], env, read);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`expected ${JSON.stringify(argv)} to be refused`);
};

describe('gateway --namespace', () => {
  it('no namespace keeps today\'s stream name', () => {
    expect(parseConfig(UP, {})).toMatchObject({ namespace: '', logStream: 'TETHER_LOG' });
    // Spelling out the default stays accepted.
    expect(parseConfig([...UP, '--log-stream', 'TETHER_LOG'], {})).toMatchObject({ namespace: '', logStream: 'TETHER_LOG' });
  });

  it('derives the stream from the namespace, from a flag, its env twin or the config file', () => {
    expect(parseConfig([...UP, '--namespace', 'staging'], {})).toMatchObject({ namespace: 'staging', logStream: 'TETHER_LOG_staging' });
    expect(parseConfig(UP, { TETHER_NAMESPACE: 'prod-eu_1' })).toMatchObject({ namespace: 'prod-eu_1', logStream: 'TETHER_LOG_prod-eu_1' });
    expect(parseConfig(['--config', '/c.json'], {}, () => '{"upstream": ["http://a/mcp"], "namespace": "t1"}')).toMatchObject({ namespace: 't1', logStream: 'TETHER_LOG_t1' });
    expect(parseConfig([...UP, '--namespace', 'b'], { TETHER_NAMESPACE: 'a' }).namespace).toBe('b');
    expect(JSON.parse(printableConfig(parseConfig([...UP, '--namespace', 'staging'], {})))).toMatchObject({ namespace: 'staging', logStream: 'TETHER_LOG_staging' });
  });

  it('with a namespace, --log-stream names its stream', () => {
    expect(parseConfig([...UP, '--namespace', 'a', '--log-stream', 'MY_LOG'], {})).toMatchObject({ namespace: 'a', logStream: 'MY_LOG' });
  });

  it('refuses --log-stream on its own (flag, env or file) with what to use instead', () => {
    for (const message of [
      refused(['--log-stream', 'STAGING']),
      refused([], { TETHER_LOG_STREAM: 'STAGING' }),
      refused(['--config', '/c.json'], {}, () => '{"log-stream": "STAGING"}'),
    ]) {
      expect(message).toMatch(/^--log-stream "STAGING" needs --namespace: on its own it renames only the stream/);
      expect(message).toContain('subjects overlap');
      expect(message).toContain('Give --namespace staging (TETHER_NAMESPACE) instead');
      expect(message).toContain('TETHER_LOG_staging');
    }
    // A name that is no namespace gets a placeholder, not a suggestion it would refuse.
    expect(refused(['--log-stream', '_X'])).toContain('Give --namespace NAME');
    // A malformed stream name is named as such first.
    expect(refused(['--log-stream', 'a.b'])).toMatch(/invalid --log-stream "a.b"; allowed: letters, digits, _ and -/);
  });

  it('refuses --namespace and --log-stream with --log grpc:// (the service\'s namespace decides), instead of ignoring them', () => {
    const grpc = ['--log', 'grpc://127.0.0.1:50051'];
    expect(refused([...grpc, '--namespace', 'staging'])).toBe(
      "--namespace has no effect with --log grpc://: the session-log service's own --namespace decides which log it serves; set it there and drop it here",
    );
    expect(refused([...grpc, '--log-stream', 'OTHER'])).toMatch(/^--log-stream has no effect with --log grpc:\/\//);
    expect(parseConfig([...UP, ...grpc], {})).toMatchObject({ namespace: '', logStream: 'TETHER_LOG', logUrl: 'grpc://127.0.0.1:50051' });
  });

  it.each([
    ['Staging'],
    ['-a'],
    ['a.b'],
    ['a b'],
    ['a>'],
    ['x'.repeat(33)],
  ])('refuses --namespace %j naming the flag, the value and what is allowed', (name) => {
    expect(refused(['--namespace', name])).toBe(
      `invalid --namespace ${JSON.stringify(name)}; allowed: 1 to 32 lowercase letters, digits, _ and -, starting with a letter or digit`,
    );
    expect(refused([], { TETHER_NAMESPACE: name })).toContain(`invalid --namespace ${JSON.stringify(name)}`);
  });

  it('--help lists --namespace and its env twin', () => {
    expect(helpText()).toMatch(/--namespace\s+TETHER_NAMESPACE\s+separates deployments on one NATS account/);
    expect(helpText()).toMatch(/--log-stream\s+TETHER_LOG_STREAM\s+.*needs --namespace.*\(default TETHER_LOG\)/);
  });
});
