import { describe, expect, it } from 'vitest';
import { ConfigError, FLAGS, helpText, ignoredWithGrpcLog, parseConfig, printableConfig } from '@tether/gateway';

describe('gateway config', () => {
  it('parses flags, repeats and routes, with env twins and flags winning', () => {
    const config = parseConfig(
      ['--upstream', 'http://a:1/mcp', '--upstream=http://b:2/mcp', '--route', '/github/mcp=http://g1/mcp,http://g2/mcp', '--port', '9000', '--log-max-age', '30s'],
      { TETHER_PORT: '7000', TETHER_HEARTBEAT: '5s', TETHER_ROUTES: '/ignored=http://x/mcp' },
    );
    expect(config.port).toBe(9000);
    expect(config.heartbeatMs).toBe(5_000);
    expect(config.logMaxAgeMs).toBe(30_000);
    expect(config.routes).toEqual([
      { path: '/mcp', upstreams: ['http://a:1/mcp', 'http://b:2/mcp'] },
      { path: '/github/mcp', upstreams: ['http://g1/mcp', 'http://g2/mcp'] },
    ]);
  });

  it('reads everything from the environment when no flag is given', () => {
    const config = parseConfig([], { TETHER_UPSTREAMS: 'http://a/mcp,http://b/mcp', TETHER_ROUTES: '/x/mcp=http://x/mcp;/y/mcp=http://y/mcp', TETHER_LOG_URL: 'grpc://127.0.0.1:50051' });
    expect(config.routes.map((r) => r.path)).toEqual(['/mcp', '/x/mcp', '/y/mcp']);
    expect(config.logUrl).toBe('grpc://127.0.0.1:50051');
  });

  it.each([
    [['--port', 'x', '--upstream', 'http://a/mcp'], /invalid --port "x"; allowed: an integer from 0 to 65535/],
    [['--upstream', 'ftp://a/mcp'], /invalid --upstream URL "ftp:\/\/a\/mcp"/],
    [['--upstream', 'http://a/mcp', '--route', 'nopath'], /invalid --route "nopath"/],
    [['--upstream', 'http://a/mcp', '--route', '/mcp=http://b/mcp'], /already routed/],
    [['--upstream', 'http://a/mcp', '--log-max-age', '10 minutes'], /invalid --log-max-age "10 minutes"/],
    [['--upstream', 'http://a/mcp', '--log', 'http://x'], /invalid --log "http:\/\/x"; allowed: grpc:\/\/host:port/],
    [['--upstream', 'http://a/mcp', '--bogus', '1'], /unknown flag --bogus/],
    [['--upstream'], /flag --upstream needs a value/],
    [[], /no upstream configured/],
    [['--upstream', 'http://a/mcp', '--task-tools', 'a,b', '--no-task-tools', 'b'], /--task-tools and --no-task-tools both name "b"/],
    [['--upstream', 'http://a/mcp', '--task-tool-list', 'maybe'], /--task-tool-list "maybe"/],
  ])('refuses %j naming the flag, value and what is allowed', (argv, message) => {
    expect(() => parseConfig(argv, {})).toThrow(ConfigError);
    expect(() => parseConfig(argv, {})).toThrow(message);
  });

  it('--help lists every flag with its env twin', () => {
    const text = helpText();
    for (const f of FLAGS) {
      expect(text).toContain(`--${f.flag}`);
      expect(text).toContain(f.env);
    }
  });

  it('reads a --config file keyed by flag names; flags beat env beat the file beat defaults', () => {
    const file = JSON.stringify({ upstream: ['http://file/mcp'], port: 1111, heartbeat: '3s', retry: 2000, 'log-token': 'from-file' });
    const read = (path: string) => {
      expect(path).toBe('/etc/tether.json');
      return file;
    };
    const fromFile = parseConfig(['--config', '/etc/tether.json'], {}, read);
    expect(fromFile).toMatchObject({ port: 1111, heartbeatMs: 3_000, retryMs: 2_000, logToken: 'from-file' });
    expect(fromFile.routes[0]!.upstreams).toEqual(['http://file/mcp']);
    const layered = parseConfig(['--port', '3333'], { TETHER_CONFIG: '/etc/tether.json', TETHER_PORT: '2222', TETHER_RETRY: '500' }, read);
    expect(layered).toMatchObject({ port: 3333, retryMs: 500, heartbeatMs: 3_000 });
  });

  it.each([
    ['{"bogus": 1}', /unknown key "bogus"/],
    ['{"port": [1]}', /key "port" is \[1\]; allowed: a string or number$/],
    ['{"upstream": [1]}', /key "upstream" is \[1\]; allowed: a string or number, or an array of strings/],
    ['[1,2]', /expected a JSON object keyed by flag names/],
    ['{port: 1}', /invalid --config "f.json": /],
    ['{"upstream": "http://a/mcp", "port": "x"}', /invalid --port "x"/],
  ])('refuses a bad config file %s naming the file, key and what is allowed', (text, message) => {
    expect(() => parseConfig(['--config', 'f.json'], {}, () => text)).toThrow(message);
  });

  it('--print-config masks secrets', () => {
    const printed = printableConfig(parseConfig(['--upstream', 'http://a/mcp', '--log-token', 'hunter2'], {}));
    expect(printed).not.toContain('hunter2');
    expect(JSON.parse(printed)).toMatchObject({ logToken: '***', routes: [{ path: '/mcp' }] });
  });
});

describe('gateway --log-partitions and --log-placement-tags', () => {
  const UP = ['--upstream', 'http://a/mcp'];
  const refusal = (argv: string[], env: Record<string, string> = {}, read?: (path: string) => string): string => {
    try {
      parseConfig([...UP, ...argv], env, read);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error(`expected ${JSON.stringify(argv)} to be refused`);
  };

  it('default to one partition and no tags: the unpartitioned layout', () => {
    expect(parseConfig(UP, {})).toMatchObject({ logPartitions: 1, logPlacementTags: [] });
  });

  it('are read from flags, their env twins and the config file; flags win', () => {
    expect(parseConfig([...UP, '--log-partitions', '4', '--log-placement-tags', 'region:eu, ssd'], {})).toMatchObject({ logPartitions: 4, logPlacementTags: ['region:eu', 'ssd'] });
    expect(parseConfig(UP, { TETHER_LOG_PARTITIONS: '256', TETHER_LOG_PLACEMENT_TAGS: 'az=1,rack/7' })).toMatchObject({ logPartitions: 256, logPlacementTags: ['az=1', 'rack/7'] });
    expect(parseConfig(['--config', '/c.json'], {}, () => '{"upstream": ["http://a/mcp"], "log-partitions": 8, "log-placement-tags": "eu"}')).toMatchObject({ logPartitions: 8, logPlacementTags: ['eu'] });
    expect(parseConfig([...UP, '--log-partitions', '2'], { TETHER_LOG_PARTITIONS: '3' }).logPartitions).toBe(2);
    expect(JSON.parse(printableConfig(parseConfig([...UP, '--log-partitions', '4'], {})))).toMatchObject({ logPartitions: 4, logPlacementTags: [] });
  });

  it.each(['0', '257', '-1', '1.5', '4x', '', ' '])('refuses --log-partitions %j naming the flag, the value and what is allowed', (value) => {
    expect(refusal(['--log-partitions', value])).toBe(`invalid --log-partitions ${JSON.stringify(value)}; allowed: an integer from 1 to 256`);
    expect(refusal([], { TETHER_LOG_PARTITIONS: value })).toBe(`invalid --log-partitions ${JSON.stringify(value)}; allowed: an integer from 1 to 256`);
  });

  it.each(['a b', 'x'.repeat(65), 'eu,bad*tag', 'ü'])('refuses --log-placement-tags %j naming the flag, the bad tag and what is allowed', (value) => {
    const bad = value.split(',').at(-1)!;
    expect(refusal(['--log-placement-tags', value])).toBe(
      `invalid --log-placement-tags ${JSON.stringify(bad)}; allowed: server tags of 1 to 64 letters, digits and _ : . / = -, comma separated`,
    );
  });

  it('are ignored with --log grpc:// (the service lays out the log), and named for the startup warning', () => {
    const grpc = [...UP, '--log', 'grpc://127.0.0.1:50051'];
    const config = parseConfig([...grpc, '--log-partitions', '4', '--log-placement-tags', 'eu'], {});
    expect(ignoredWithGrpcLog(config)).toEqual(['--log-partitions', '--log-placement-tags']);
    expect(ignoredWithGrpcLog(parseConfig(grpc, {}))).toEqual([]);
    expect(ignoredWithGrpcLog(parseConfig([...grpc, '--log-partitions', '1'], {}))).toEqual([]);
    // In-process, they are used: nothing is ignored.
    expect(ignoredWithGrpcLog(parseConfig([...UP, '--log-partitions', '4', '--log-placement-tags', 'eu'], {}))).toEqual([]);
    // A bad value is still refused in gRPC mode.
    expect(refusal(['--log', 'grpc://127.0.0.1:50051', '--log-partitions', '0'])).toMatch(/^invalid --log-partitions "0"/);
  });

  it('--help lists both with their env twins and the range', () => {
    expect(helpText()).toMatch(/--log-partitions\s+TETHER_LOG_PARTITIONS\s+streams the log is spread over, 1 to 256; the same on every process of a deployment.*\(default 1\)/);
    expect(helpText()).toMatch(/--log-placement-tags\s+TETHER_LOG_PLACEMENT_TAGS\s+server tags/);
  });
});
