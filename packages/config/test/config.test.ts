import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as config from '@tether/config';
import { ConfigError, duration, helpLines, int, list, matching, parseArgs, rawValue, readConfigFile, readSettings } from '@tether/config';
import type { FlagSpec } from '@tether/config';

const FLAGS = [
  { flag: 'port', env: 'T_PORT', help: 'port', fallback: '80' },
  { flag: 'name', env: 'T_NAME', help: 'name', fallback: '' },
  { flag: 'peer', env: 'T_PEERS', help: 'peers', fallback: 'a,b', repeat: true },
  { flag: 'route', env: 'T_ROUTES', help: 'routes', fallback: '', repeat: true },
  { flag: 'secret', env: 'T_SECRET', help: 'secret', fallback: '', repeat: true },
  { flag: 'config', env: 'T_CONFIG', help: 'config file', fallback: '' },
] as const satisfies readonly FlagSpec[];
const OPTIONS = { separator: (flag: string) => (flag === 'route' ? ';' : ','), secretFlags: ['secret'] };

/** The thrown error, asserted to be a ConfigError with the shared code. */
function refusal(run: () => unknown): ConfigError {
  let caught: unknown;
  try {
    run();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  expect((caught as ConfigError).code).toBe('invalid_config');
  return caught as ConfigError;
}

describe('parseArgs', () => {
  it('takes --name value and --name=value, keeping repeats in order', () => {
    const given = parseArgs(['--peer', 'x', '--port=1', '--peer=y', '--route', '/a=http://h/mcp', '--port', '2', '--name='], FLAGS);
    expect(Object.fromEntries(given)).toEqual({ peer: ['x', 'y'], port: ['1', '2'], route: ['/a=http://h/mcp'], name: [''] });
  });

  it('skips the switches main handles, without eating the next argument', () => {
    expect(Object.fromEntries(parseArgs(['--help', '-h', '--print-config', '--port', '1'], FLAGS))).toEqual({ port: ['1'] });
  });

  it.each([
    [['positional'], 'unexpected argument "positional"; flags look like --name value (see --help)'],
    [['--port', '1', '--bogus', '1'], 'unknown flag --bogus (see --help)'],
    [['--bogus=1'], 'unknown flag --bogus (see --help)'],
    [['--peer', 'x', '--port'], 'flag --port needs a value'],
  ])('refuses %j', (argv, message) => {
    expect(refusal(() => parseArgs(argv, FLAGS)).message).toBe(message);
  });

  it('property: --name value and --name=value parse to the same values, in order', () => {
    const names = FLAGS.map((f) => f.flag);
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom(...names), fc.string())), (pairs) => {
        const spaced = parseArgs(pairs.flatMap(([n, v]) => [`--${n}`, v]), FLAGS);
        const joined = parseArgs(pairs.map(([n, v]) => `--${n}=${v}`), FLAGS);
        expect(joined).toEqual(spaced);
        for (const n of names) expect(spaced.get(n)).toEqual(pairs.some(([m]) => m === n) ? pairs.filter(([m]) => m === n).map(([, v]) => v) : undefined);
      }),
    );
  });
});

describe('rawValue', () => {
  const file = new Map([['port', '3'], ['peer', 'f1,f2'], ['name', 'from-file']]);
  const raw = (argv: string[], env: Record<string, string>, name: (typeof FLAGS)[number]['flag']) =>
    rawValue(FLAGS, name, { given: parseArgs(argv, FLAGS), env, file }, OPTIONS);

  it('flags beat env beat the config file beat defaults', () => {
    expect(raw(['--port', '1'], { T_PORT: '2' }, 'port')).toBe('1');
    expect(raw([], { T_PORT: '2' }, 'port')).toBe('2');
    expect(raw([], {}, 'port')).toBe('3');
    expect(rawValue(FLAGS, 'port', { given: new Map(), env: {}, file: new Map() })).toBe('80');
  });

  it('joins repeated flags with the flag\'s separator; they replace the lower layers as a whole', () => {
    expect(raw(['--peer', 'x', '--peer', 'y'], { T_PEERS: 'e' }, 'peer')).toBe('x,y');
    expect(raw(['--route', '/a=u1,u2', '--route', '/b=u3'], {}, 'route')).toBe('/a=u1,u2;/b=u3');
    expect(raw([], {}, 'peer')).toBe('f1,f2');
    expect(rawValue(FLAGS, 'route', { given: parseArgs(['--route', 'x', '--route', 'y'], FLAGS), env: {}, file }, {})).toBe('x,y');
  });
});

describe('readSettings', () => {
  const files: Record<string, string> = { '/a.json': '{"port": 3, "name": "a"}', '/b.json': '{"port": 4}' };
  const readFile = (path: string): string => {
    const text = files[path];
    if (text === undefined) throw new Error(`ENOENT ${path}`);
    return text;
  };

  it('reads the file named by the last --config, else by its environment twin, under flags and env', () => {
    const fromFlag = readSettings(['--config', '/b.json', '--config', '/a.json'], { T_CONFIG: '/b.json', T_PORT: '2' }, readFile, FLAGS, OPTIONS);
    expect([fromFlag.configPath, fromFlag.raw('port'), fromFlag.raw('name')]).toEqual(['/a.json', '2', 'a']);
    const fromEnv = readSettings([], { T_CONFIG: '/b.json' }, readFile, FLAGS, OPTIONS);
    expect([fromEnv.configPath, fromEnv.raw('port'), fromEnv.raw('peer')]).toEqual(['/b.json', '4', 'a,b']);
    const none = readSettings(['--port', '1'], {}, readFile, FLAGS, OPTIONS);
    expect([none.configPath, none.raw('port')]).toEqual(['', '1']);
  });

  it('refuses an unreadable config file, naming it', () => {
    expect(refusal(() => readSettings(['--config', '/missing.json'], {}, readFile, FLAGS, OPTIONS)).message).toContain('/missing.json');
  });
});

describe('readConfigFile', () => {
  const read = (text: string) => readConfigFile('c.json', () => text, FLAGS, OPTIONS);

  it('reads strings, numbers and arrays of strings for repeatable flags, joined like argv repeats', () => {
    const out = read(JSON.stringify({ port: 8080, name: 'n', peer: ['p1', 'p2'], route: ['/a=u1,u2', '/b=u3'], secret: 's' }));
    expect(Object.fromEntries(out)).toEqual({ port: '8080', name: 'n', peer: 'p1,p2', route: '/a=u1,u2;/b=u3', secret: 's' });
  });

  it.each([
    ['{"bogus": 1}', 'invalid --config "c.json": unknown key "bogus" (keys are flag names, see --help)'],
    ['{"config": "other.json"}', 'invalid --config "c.json": unknown key "config" (keys are flag names, see --help)'],
    ['{"port": [1]}', 'invalid --config "c.json": key "port" is [1]; allowed: a string or number'],
    ['{"port": ["1"]}', 'invalid --config "c.json": key "port" is ["1"]; allowed: a string or number'],
    ['{"port": true}', 'invalid --config "c.json": key "port" is true; allowed: a string or number'],
    ['{"port": null}', 'invalid --config "c.json": key "port" is null; allowed: a string or number'],
    ['{"peer": [1]}', 'invalid --config "c.json": key "peer" is [1]; allowed: a string or number, or an array of strings'],
    ['{"secret": ["ok", {"hunter2": 1}]}', 'invalid --config "c.json": key "secret" is not a string; allowed: a string or number, or an array of strings'],
    ['[1,2]', 'invalid --config "c.json": expected a JSON object keyed by flag names'],
    ['"port"', 'invalid --config "c.json": expected a JSON object keyed by flag names'],
  ])('refuses %s naming the file, the key and what is allowed', (text, message) => {
    expect(refusal(() => read(text)).message).toBe(message);
  });

  it('refuses bad JSON and an unreadable file, naming the file and keeping the cause', () => {
    expect(refusal(() => read('{port: 1}')).message).toMatch(/^invalid --config "c.json": .*JSON/);
    const missing = new Error("ENOENT: no such file, open 'c.json'");
    const err = refusal(() =>
      readConfigFile('c.json', () => {
        throw missing;
      }, FLAGS),
    );
    expect(err.message).toBe(`invalid --config "c.json": ${missing.message}`);
    expect(err.cause).toBe(missing);
  });
});

describe('helpLines', () => {
  it('one line per flag in table order, padded to the caller\'s widths, with the default when there is one', () => {
    const lines = helpLines(FLAGS, { flagWidth: 8, envWidth: 9 });
    expect(lines).toHaveLength(FLAGS.length);
    expect(lines[0]).toBe('  --port     T_PORT    port (default 80)');
    expect(lines[1]).toBe('  --name     T_NAME    name');
  });
});

describe('value checks', () => {
  it('list drops blanks and trims', () => {
    expect(list(' a, ,b,,c ')).toEqual(['a', 'b', 'c']);
    expect(list('/a=x,y;/b=z', ';')).toEqual(['/a=x,y', '/b=z']);
    expect(list('')).toEqual([]);
  });

  it('int: both bounds inclusive, whole decimal numbers only', () => {
    expect(int('n', '0', 0, 10)).toBe(0);
    expect(int('n', '10', 0, 10)).toBe(10);
    expect(int('n', '-1', -1, 10)).toBe(-1);
    expect(int('n', ' 7 ', 0, 10)).toBe(7);
    for (const bad of ['11', '-1', '', ' ', '1e1', '0x1', '1.5', 'x', '99999999999999999999']) {
      expect(refusal(() => int('n', bad, 0, 10)).message).toBe(`invalid --n ${JSON.stringify(bad)}; allowed: an integer from 0 to 10`);
    }
  });

  it('duration: bare ms or s/m/h units, at least minMs', () => {
    expect(duration('d', '1000', 1_000)).toBe(1_000);
    expect(duration('d', '250ms', 0)).toBe(250);
    expect(duration('d', '30s', 1_000)).toBe(30_000);
    expect(duration('d', '15m', 1_000)).toBe(900_000);
    expect(duration('d', '24h', 1_000)).toBe(86_400_000);
    expect(duration('d', '0', 0)).toBe(0);
    for (const bad of ['999', '0s', '10 minutes', '1d', '-1s', '1.5s', '', 's']) {
      expect(refusal(() => duration('d', bad, 1_000)).message).toBe(`invalid --d ${JSON.stringify(bad)}; allowed: milliseconds or a duration like 30s, 15m, 24h, at least 1000 ms`);
    }
  });

  it('property: n<unit> is n times the unit, refused exactly when under the minimum', () => {
    const units = { '': 1, ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;
    fc.assert(
      fc.property(fc.nat(1_000_000), fc.constantFrom(...(Object.keys(units) as (keyof typeof units)[])), fc.nat(10_000), (n, unit, minMs) => {
        const ms = n * units[unit];
        if (ms >= minMs) expect(duration('d', `${n}${unit}`, minMs)).toBe(ms);
        else refusal(() => duration('d', `${n}${unit}`, minMs));
      }),
    );
  });

  it('matching says what is allowed in words', () => {
    expect(matching('s', 'TETHER_LOG', /^[A-Z_]+$/, 'capitals and _')).toBe('TETHER_LOG');
    expect(refusal(() => matching('s', 'a.b', /^[A-Z_]+$/, 'capitals and _')).message).toBe('invalid --s "a.b"; allowed: capitals and _');
  });
});

describe('package boundary', () => {
  const here = (p: string): URL => new URL(p, import.meta.url);

  it('exports exactly the public runtime surface', () => {
    expect(Object.keys(config).sort()).toEqual(['ConfigError', 'duration', 'helpLines', 'int', 'list', 'matching', 'parseArgs', 'rawValue', 'readConfigFile', 'readSettings']);
  });

  it('ConfigError keeps the name and code both services exported', () => {
    const err = new ConfigError('x', { cause: 1 });
    expect([err.name, err.code, err.cause, err instanceof Error]).toEqual(['ConfigError', 'invalid_config', 1, true]);
  });

  it('has no runtime dependencies, no node: imports and no export *', () => {
    const pkg = JSON.parse(readFileSync(here('../package.json'), 'utf8')) as Record<string, unknown>;
    expect(pkg['dependencies']).toBeUndefined();
    for (const file of readdirSync(here('../src'))) {
      const text = readFileSync(here(`../src/${file}`), 'utf8');
      expect(text, file).not.toMatch(/^\s*export\s+\*/m);
      for (const m of text.matchAll(/from\s+['"]([^'"]+)['"]/g)) expect(m[1], file).toMatch(/^\.\//);
    }
  });
});
