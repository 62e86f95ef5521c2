import { afterEach, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import * as probe from '@tether/probe';
import { main, parseCliArgs } from '@tether/probe';
import { GapAfterEvictionServer, TetherLikeServer } from './zoo/index.js';
import type { ZooHandle } from './zoo/index.js';

const here = (p: string): URL => new URL(p, import.meta.url);
const open: ZooHandle[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((h) => h.close()));
});

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

describe('parseCliArgs', () => {
  it('reads every flag', () => {
    const cli = parseCliArgs([
      'http://a.test/mcp',
      '--via',
      'http://b.test/mcp',
      '--tool',
      'count',
      '--args',
      '{"n":5}',
      '--header',
      'Authorization: Bearer x',
      '--header',
      'X-Team:  blue ',
      '--json',
      '--cut-after',
      '3',
      '--wait-ms',
      '0',
      '--timeout-ms',
      '500',
    ]);
    expect(cli).toEqual({
      json: true,
      options: {
        url: 'http://a.test/mcp',
        via: 'http://b.test/mcp',
        tool: 'count',
        args: { n: 5 },
        headers: { authorization: 'Bearer x', 'x-team': 'blue' },
        cutAfterEvents: 3,
        waitMs: 0,
        timeoutMs: 500,
      },
    });
  });

  it('returns undefined for --help', () => {
    expect(parseCliArgs(['--help'])).toBeUndefined();
  });

  it.each([
    [[], 'expected one URL'],
    [['ftp://x/mcp'], 'must be an http(s) URL'],
    [['http://a/mcp', '--args', '{'], '--args must be JSON'],
    [['http://a/mcp', '--tool', 't', '--args', '[1]'], '--args must be a JSON object'],
    [['http://a/mcp', '--args', '{}'], '--args needs --tool'],
    [['http://a/mcp', '--header', 'no colon'], "--header must look like 'Name: value'"],
    [['http://a/mcp', '--cut-after', '0'], '--cut-after must be an integer >= 1'],
    [['http://a/mcp', '--bogus'], 'Unknown option'],
  ])('refuses %j with a clear usage error', (argv, message) => {
    expect(() => parseCliArgs(argv)).toThrow(message);
    try {
      parseCliArgs(argv);
    } catch (e) {
      expect(probe.isProbeError(e, 'usage')).toBe(true);
    }
  });
});

describe('main', () => {
  it('prints one JSON line and exits 1 on a silent failure', async () => {
    const server = await new GapAfterEvictionServer().start();
    open.push(server);
    const { code, out } = await run([server.url, '--json']);
    expect(code).toBe(1);
    expect(out.trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(out)).toMatchObject({ url: server.url, classification: 'gap', silent: true });
  });

  it('prints a report for people and exits 0 when the endpoint resumes correctly', async () => {
    const server = await new TetherLikeServer('correct').start();
    open.push(server);
    const { code, out } = await run([server.url]);
    expect(code).toBe(0);
    for (const heading of ['result: correct', 'What was checked', 'What was seen', 'What it means', 'What to do']) expect(out).toContain(heading);
    expect(out).toContain('unknown cursor: HTTP 404 (epoch_mismatch), explicit');
  });

  it('exits 2 with the error code when it cannot probe', async () => {
    const server = await new TetherLikeServer('correct').start();
    await server.close();
    const { code, err } = await run([server.url]);
    expect(code).toBe(2);
    expect(err).toMatch(/^tether-probe: initialize_failed: /);
  });

  it('exits 2 and prints usage on a bad command line', async () => {
    const { code, err } = await run(['--json']);
    expect(code).toBe(2);
    expect(err).toContain('usage: tether-probe URL');
  });
});

describe('package boundary', () => {
  it('exports exactly the public runtime surface', () => {
    expect(Object.keys(probe).sort()).toEqual(
      [
        'Classification',
        'GUIDANCE',
        'MALFORMED_CURSOR',
        'ProbeError',
        'ProbeErrorCode',
        'USAGE',
        'exitCodeOf',
        'formatHuman',
        'formatJson',
        'isProbeError',
        'isSilent',
        'main',
        'parseCliArgs',
        'runProbe',
        'unknownIdLike',
      ].sort(),
    );
  });

  it('has one module with side effects (bin.ts), and no wholesale re-exports', () => {
    const pkg = JSON.parse(readFileSync(here('../package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(pkg.bin).toEqual({ 'tether-probe': './bin/tether-probe.js' });
    for (const file of readdirSync(here('../src'))) {
      const text = readFileSync(here(`../src/${file}`), 'utf8');
      expect(text, file).not.toMatch(/^\s*export\s+\*/m);
      if (file !== 'bin.ts') expect(text, file).not.toMatch(/process\.(exit|argv|stdout)/);
    }
  });

  it('makes unknown cursors of the same shape', () => {
    expect(probe.unknownIdLike('41')).toBe('1000041');
    expect(probe.unknownIdLike('abcdefgh23-0-3-77')).toMatch(/^[a-z2-7]{10}-0-3-77$/);
    expect(probe.unknownIdLike('abcdefgh23-0-3-77')).not.toBe('abcdefgh23-0-3-77');
    expect(probe.unknownIdLike('s_1_x')).toBe('s_1_x-tether-probe-unknown');
  });
});
