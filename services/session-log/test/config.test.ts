import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, FLAGS, helpText, parseConfig, printableConfig } from '@tether/session-log-service';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

describe('flags and environment', () => {
  it('defaults: 127.0.0.1:50051, local NATS, no tokens, library log layout', () => {
    const { options, logLevel } = parseConfig([], {});
    expect(options).toMatchObject({ host: '127.0.0.1', port: 50051, nats: ['nats://127.0.0.1:4222'], tokens: [], maxPayloadBytes: 1044480, maxBatchEntries: 1000, maxStreamsPerCaller: 1000 });
    expect(options.log).toEqual({ streamName: 'TETHER_LOG', subjectPrefix: 'tether', maxAgeMs: 86_400_000, maxMsgsPerStream: 100_000, replicas: 1, partitions: 1, placementTags: [], sessionIdleMs: 3_600_000 });
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

describe('config file, precedence and --print-config', () => {
  const FILE = '/etc/tether/session-log.json';
  const reader = (files: Record<string, string>) => (path: string) => {
    const text = files[path];
    if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`);
    return text;
  };

  it('reads a --config file keyed by flag names; flags beat env beat the file beat defaults', () => {
    const file = JSON.stringify({ port: 1111, nats: ['nats://f1:4222', 'nats://f2:4222'], token: ['gw:file-secret-0123456789'], 'log-max-age': '2h', 'max-batch-entries': 50, 'log-level': 'warn' });
    const read = reader({ [FILE]: file });
    const fromFile = parseConfig(['--config', FILE], {}, read);
    expect(fromFile.options).toMatchObject({ port: 1111, nats: ['nats://f1:4222', 'nats://f2:4222'], tokens: ['gw:file-secret-0123456789'], maxBatchEntries: 50, log: { maxAgeMs: 7_200_000 } });
    expect(fromFile.logLevel).toBe('warn');
    expect(fromFile.options.maxStreamsPerCaller).toBe(1000);

    // TETHER_CONFIG names the file too; env beats it, a flag beats both.
    const layered = parseConfig(['--port', '3333'], { TETHER_CONFIG: FILE, TETHER_GRPC_PORT: '2222', TETHER_MAX_BATCH_ENTRIES: '70', TETHER_GRPC_TOKENS: 'env:env-secret-0123456789' }, read);
    expect(layered.options).toMatchObject({ port: 3333, maxBatchEntries: 70, tokens: ['env:env-secret-0123456789'], log: { maxAgeMs: 7_200_000 } });
    expect(layered.logLevel).toBe('warn');
    // Repeated flags replace the file's array, they do not add to it.
    expect(parseConfig(['--config', FILE, '--nats', 'nats://a:1', '--nats', 'nats://b:2'], {}, read).options.nats).toEqual(['nats://a:1', 'nats://b:2']);
    // --config on the command line beats TETHER_CONFIG.
    const other = reader({ [FILE]: file, '/other.json': '{"port": 4444}' });
    expect(parseConfig(['--config=/other.json'], { TETHER_CONFIG: FILE }, other).options.port).toBe(4444);
  });

  it('reads --token-file and TLS files through the same reader, at startup', () => {
    const read = reader({ '/tokens': '# gateways\ngw-a:aaaaaaaaaaaaaaaaaaaa\n\ngw-b:bbbbbbbbbbbbbbbbbbbb\n', '/c.pem': 'CERT', '/k.pem': 'KEY', '/ca.pem': 'CA' });
    const config = parseConfig(['--token-file', '/tokens', '--tls-cert', '/c.pem', '--tls-key', '/k.pem', '--tls-client-ca', '/ca.pem'], {}, read);
    expect(config.options.tokens).toEqual(['gw-a:aaaaaaaaaaaaaaaaaaaa', 'gw-b:bbbbbbbbbbbbbbbbbbbb']);
    expect(config.options.tls).toEqual({ cert: 'CERT', key: 'KEY', clientCa: 'CA' });
    expect(config.files).toEqual({ tokenFile: '/tokens', tlsCert: '/c.pem', tlsKey: '/k.pem', tlsClientCa: '/ca.pem' });
  });

  it.each([
    ['{"bogus": 1}', /invalid --config "f.json": unknown key "bogus" \(keys are flag names/],
    ['{"config": "other.json"}', /unknown key "config"/],
    ['{"port": [1]}', /key "port" is \[1\]; allowed: a string or number$/],
    ['{"token": [1]}', /key "token" is not a string; allowed: a string or number, or an array of strings/],
    ['{"port": true}', /key "port" is true; allowed: a string or number$/],
    ['[1,2]', /invalid --config "f.json": expected a JSON object keyed by flag names/],
    ['{port: 1}', /invalid --config "f.json": .*JSON/],
    ['{"port": "x"}', /invalid --port "x"; allowed: an integer from 0 to 65535/],
    ['{"log-stream": "a.b"}', /invalid --log-stream "a.b"; allowed: letters, digits, _ and -/],
    ['{"nats": "http://x:1"}', /invalid --nats "http:\/\/x:1"; allowed: nats:\/\/host:port/],
  ])('refuses a bad config file %s naming the file or key, the value and what is allowed', (text, message) => {
    let caught: unknown;
    try {
      parseConfig(['--config', 'f.json'], {}, () => text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).toMatch(message);
  });

  it('a missing config or token file is refused at startup, naming the flag and path', () => {
    expect(() => parseConfig(['--config', '/nope.json'], {}, reader({}))).toThrow(/invalid --config "\/nope.json": ENOENT/);
    expect(() => parseConfig([], { TETHER_GRPC_TOKEN_FILE: '/nope' }, reader({}))).toThrow(/cannot read --token-file "\/nope"/);
  });

  it('a short token secret is refused without repeating it', () => {
    for (const [argv, env, files] of [
      [['--token', 'gw:short-secret'], {}, {}],
      [[], { TETHER_CONFIG: '/c.json' }, { '/c.json': '{"token": ["gw:short-secret"]}' }],
      [['--token-file', '/t'], {}, { '/t': 'ok:0123456789abcdef0123\ngw:short-secret\n' }],
    ] as const) {
      let caught: unknown;
      try {
        parseConfig(argv, env, reader(files));
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConfigError);
      expect((caught as Error).message).toMatch(/invalid --token.*at least 16 characters \(token 'gw'\); allowed: name:secret/);
      expect((caught as Error).message).not.toContain('short-secret');
    }
  });

  it('--print-config masks token secrets and NATS credentials and shows file paths, not their contents', () => {
    const read = reader({ '/tokens': 'gw-file:file-secret-0123456789\n', '/c.pem': 'CERT', '/k.pem': '-----BEGIN PRIVATE KEY-----' });
    const config = parseConfig(
      ['--token', 'gw:hunter2-hunter2-hunter2', '--token', 'bare-secret-0123456789', '--token-file', '/tokens', '--tls-cert', '/c.pem', '--tls-key', '/k.pem', '--nats', 'nats://svc:natspass@n1:4222,nats://tok3n@n2:4222,n3:4222'],
      {},
      read,
    );
    const printed = printableConfig(config);
    for (const secret of ['hunter2', 'bare-secret', 'file-secret', 'natspass', 'tok3n', 'PRIVATE KEY', 'CERT']) expect(printed).not.toContain(secret);
    const json = JSON.parse(printed) as Record<string, unknown>;
    expect(json).toMatchObject({
      host: '127.0.0.1',
      port: 50051,
      nats: ['nats://svc:***@n1:4222', 'nats://***@n2:4222', 'n3:4222'],
      tokenFile: '/tokens',
      tls: { cert: '/c.pem', key: '/k.pem' },
      log: { streamName: 'TETHER_LOG', maxAgeMs: 86_400_000 },
      logLevel: 'info',
    });
    const tokens = json.tokens as string[];
    expect(tokens).toHaveLength(3);
    expect(tokens[0]).toBe('gw:***');
    expect(tokens[1]).toMatch(/^token-[0-9a-f]{8}:\*\*\*$/);
    expect(tokens[2]).toBe('gw-file:***');
  });

  it('the bin: --print-config prints JSON and exits 0; --help states the precedence; a bad value exits 2 naming it', () => {
    const run = (args: string[], env: Record<string, string> = {}) =>
      spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '', ...env }, timeout: 20_000 });
    const printed = run(['--print-config', '--port', '6001'], { TETHER_GRPC_TOKENS: 'gw:hunter2-hunter2-hunter2' });
    expect(printed.status).toBe(0);
    expect(JSON.parse(printed.stdout)).toMatchObject({ port: 6001, tokens: ['gw:***'] });
    expect(printed.stdout).not.toContain('hunter2');
    const help = run(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('Precedence: flags, then environment, then the');
    expect(help.stdout).toContain('--print-config');
    const bad = run(['--port', 'x']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('invalid --port "x"; allowed: an integer from 0 to 65535');
  });
});

describe('--log-partitions and --log-placement-tags', () => {
  const refusal = (argv: string[], env: Record<string, string> = {}): string => {
    try {
      parseConfig(argv, env);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error(`expected ${JSON.stringify(argv)} to be refused`);
  };

  it('go to the log options, from flags, env twins or the config file; flags win', () => {
    expect(parseConfig(['--log-partitions', '4', '--log-placement-tags', 'region:eu, ssd'], {}).options.log).toMatchObject({ partitions: 4, placementTags: ['region:eu', 'ssd'] });
    expect(parseConfig([], { TETHER_LOG_PARTITIONS: '256', TETHER_LOG_PLACEMENT_TAGS: 'az=1,rack/7' }).options.log).toMatchObject({ partitions: 256, placementTags: ['az=1', 'rack/7'] });
    expect(parseConfig(['--config', '/c.json'], {}, () => '{"log-partitions": 8, "log-placement-tags": "eu"}').options.log).toMatchObject({ partitions: 8, placementTags: ['eu'] });
    expect(parseConfig(['--log-partitions', '2'], { TETHER_LOG_PARTITIONS: '3' }).options.log?.partitions).toBe(2);
    expect(JSON.parse(printableConfig(parseConfig(['--log-partitions', '4', '--namespace', 'staging'], {})))).toMatchObject({ log: { namespace: 'staging', partitions: 4, placementTags: [] } });
  });

  it.each(['0', '257', '-1', '1.5', '4x', ''])('refuses --log-partitions %j naming the flag, the value and what is allowed', (value) => {
    expect(refusal(['--log-partitions', value])).toBe(`invalid --log-partitions ${JSON.stringify(value)}; allowed: an integer from 1 to 256`);
    expect(refusal([], { TETHER_LOG_PARTITIONS: value })).toBe(`invalid --log-partitions ${JSON.stringify(value)}; allowed: an integer from 1 to 256`);
  });

  it.each(['a b', 'x'.repeat(65), 'eu,bad*tag', 'ü'])('refuses --log-placement-tags %j naming the flag, the bad tag and what is allowed', (value) => {
    const bad = value.split(',').at(-1)!;
    expect(refusal(['--log-placement-tags', value])).toBe(
      `invalid --log-placement-tags ${JSON.stringify(bad)}; allowed: server tags of 1 to 64 letters, digits and _ : . / = -, comma separated`,
    );
  });

  it('--help lists both with their env twins and the range', () => {
    expect(helpText()).toMatch(/--log-partitions\s+TETHER_LOG_PARTITIONS\s+streams the log is spread over, 1 to 256; the same on every process of a deployment.*\(default 1\)/);
    expect(helpText()).toMatch(/--log-placement-tags\s+TETHER_LOG_PLACEMENT_TAGS\s+server tags/);
  });
});
