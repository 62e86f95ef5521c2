import { describe, expect, it } from 'vitest';
import { ConfigError, parseInspectConfig } from '../src/inspect-config.js';

const TOKEN = 'inspect-test-token-0123456789';
const parse = (argv: string[], env: Record<string, string> = {}, files: Record<string, string> = {}) =>
  parseInspectConfig(argv, env, (p) => {
    const text = files[p];
    if (text === undefined) throw new Error('ENOENT');
    return text;
  });

describe('tether-inspect flags', () => {
  it('needs a token of at least 16 characters, and withholds it in errors', () => {
    expect(() => parse([])).toThrow(ConfigError);
    expect(() => parse([])).toThrow(/needs --token/);
    expect(() => parse(['--token', 'short-secret'])).toThrow(/at least 16 characters/);
    expect(() => parse(['--token', 'short-secret'])).not.toThrow(/short-secret/);
  });

  it('defaults to loopback, NATS at the usual URL, and reads tokens from flags, env and a file', () => {
    const c = parse(['--token', TOKEN, '--port', '0']);
    expect(c).toMatchObject({ host: '127.0.0.1', port: 0, tokens: [TOKEN], nats: ['nats://127.0.0.1:4222'], namespace: undefined });
    expect(parse([], { TETHER_INSPECT_TOKEN: TOKEN }).tokens).toEqual([TOKEN]);
    expect(parse(['--token-file', '/t'], {}, { '/t': `# comment\n${TOKEN}\n\nsecond-token-0123456789\n` }).tokens).toEqual([TOKEN, 'second-token-0123456789']);
    expect(parse(['--token', TOKEN, '--nats', 'nats://a:1,nats://b:2', '--namespace', 'staging'])).toMatchObject({ nats: ['nats://a:1', 'nats://b:2'], namespace: 'staging' });
  });

  it('reads --log grpc:// with its operator token from a flag, the environment or a file, and refuses it half given', () => {
    const OP = 'operator-token-0123456789';
    expect(parse(['--token', TOKEN, '--log', 'grpc://127.0.0.1:50051', '--log-token', OP]).log).toEqual({ url: 'grpc://127.0.0.1:50051', token: OP });
    expect(parse(['--token', TOKEN, '--log', 'grpcs://logs.internal:443'], { TETHER_OPERATOR_TOKEN: OP }).log).toEqual({ url: 'grpcs://logs.internal:443', token: OP });
    expect(parse(['--token', TOKEN, '--log', 'grpc://h:1', '--log-token-file', '/op'], {}, { '/op': `# operator\n${OP}\n` }).log?.token).toBe(OP);
    expect(parse(['--token', TOKEN]).log).toBeUndefined();
    expect(() => parse(['--token', TOKEN, '--log', 'grpc://127.0.0.1:50051'])).toThrow(/needs --log-token/);
    expect(() => parse(['--token', TOKEN, '--log-token', OP])).toThrow(/--log-token needs --log/);
    expect(() => parse(['--token', TOKEN, '--log', 'http://127.0.0.1:50051', '--log-token', OP])).toThrow(/invalid --log "http:.*grpc:\/\/host:port/);
    expect(() => parse(['--token', TOKEN, '--log', 'grpc://h:1', '--log-token', OP, '--namespace', 'staging'])).toThrow(/--namespace does not apply with --log/);
    // The operator token is a secret: an error about it never repeats it.
    expect(() => parse(['--token', TOKEN, '--log', 'grpc://h:1', '--log-token', OP, '--log-token-file', '/x'])).toThrow(/not both/);
  });

  it('takes --log-partitions (or TETHER_LOG_PARTITIONS) from 1 to 256, and reads the count from the deployment without it', () => {
    expect(parse(['--token', TOKEN]).partitions).toBeUndefined();
    expect(parse(['--token', TOKEN, '--log-partitions', '4']).partitions).toBe(4);
    expect(parse(['--token', TOKEN], { TETHER_LOG_PARTITIONS: '256' }).partitions).toBe(256);
    for (const bad of ['0', '257', 'x', '1.5']) expect(() => parse(['--token', TOKEN, '--log-partitions', bad])).toThrow(/invalid --log-partitions .*from 1 to 256/);
    expect(() => parse(['--token', TOKEN, '--log', 'grpc://h:1', '--log-token', 'operator-token-0123456789', '--log-partitions', '4'])).toThrow(/--log-partitions does not apply with --log/);
  });

  it('refuses bad values by name', () => {
    expect(() => parse(['--token', TOKEN, '--namespace', 'Bad Name'])).toThrow(/namespace/);
    expect(() => parse(['--token', TOKEN, '--port', '70000'])).toThrow(/port/);
  });
});
