import { describe, expect, it } from 'vitest';
import { ConfigError, FLAGS, helpText, parseConfig } from '@tether/session-log-service';

describe('flags and environment', () => {
  it('defaults: 127.0.0.1:50051, local NATS, no tokens, library log layout', () => {
    const { options, logLevel } = parseConfig([], {});
    expect(options).toMatchObject({ host: '127.0.0.1', port: 50051, nats: ['nats://127.0.0.1:4222'], tokens: [], maxPayloadBytes: 1044480, maxBatchEntries: 1000, maxStreamsPerCaller: 1000 });
    expect(options.log).toEqual({ streamName: 'TETHER_LOG', subjectPrefix: 'tether', maxAgeMs: 86_400_000, maxMsgsPerStream: 100_000, replicas: 1, sessionIdleMs: 3_600_000 });
    expect(options.tls).toBeUndefined();
    expect(logLevel).toBe('info');
  });

  it('every flag has an environment twin; flags win', () => {
    const env = { TETHER_GRPC_PORT: '6000', TETHER_NATS_URL: 'nats://a:1,nats://b:2', TETHER_GRPC_TOKENS: 'gw:0123456789abcdef0123', TETHER_LOG_MAX_AGE: '15m' };
    expect(parseConfig([], env).options).toMatchObject({ port: 6000, nats: ['nats://a:1', 'nats://b:2'], tokens: ['gw:0123456789abcdef0123'], log: { maxAgeMs: 900_000 } });
    expect(parseConfig(['--port', '7000', '--log-max-age=2h'], env).options).toMatchObject({ port: 7000, log: { maxAgeMs: 7_200_000 } });
    expect(parseConfig(['--token', 'a:0123456789abcdef', '--token', 'b:0123456789abcdef'], env).options.tokens).toEqual(['a:0123456789abcdef', 'b:0123456789abcdef']);
    for (const flag of FLAGS) {
      expect(helpText()).toContain(`--${flag.flag}`);
      expect(helpText()).toContain(flag.env);
    }
  });

  it('refuses bad values naming the flag, the value and what is allowed', () => {
    const cases: [string[], RegExp][] = [
      [['--port', '70000'], /--port "70000".*0 to 65535/],
      [['--nope', '1'], /unknown flag --nope/],
      [['--port'], /--port needs a value/],
      [['positional'], /unexpected argument/],
      [['--log-max-age', '5'], /--log-max-age "5".*at least 1000 ms/],
      [['--tls-cert', '/x'], /--tls-cert and --tls-key go together/],
      [['--tls-client-ca', '/x'], /needs --tls-cert/],
      [['--tls-cert', '/nonexistent', '--tls-key', '/nonexistent'], /cannot read --tls-cert/],
      [['--log-level', 'loud'], /--log-level/],
    ];
    for (const [argv, message] of cases) {
      let caught: unknown;
      try {
        parseConfig(argv, {});
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConfigError);
      expect((caught as Error).message).toMatch(message);
    }
  });
});
