import { describe, expect, it } from 'vitest';
import { ConfigError } from '@tether/config';
import { helpText, parseConfig } from '../src/config.js';

describe('--log-partitions and --log-placement-tags', () => {
  const parse = (argv: string[], env: Record<string, string> = {}, file = '{}') => parseConfig(argv, env, () => file);
  const refusal = (argv: string[], env: Record<string, string> = {}): string => {
    try {
      parse(argv, env);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error(`expected ${JSON.stringify(argv)} to be refused`);
  };

  it('default to one partition and no tags: the unpartitioned layout', () => {
    expect(parse([])).toMatchObject({ logPartitions: 1, logPlacementTags: [] });
  });

  it('are read from flags, their env twins and the config file; flags win', () => {
    expect(parse(['--log-partitions', '4', '--log-placement-tags', 'region:eu, ssd'])).toMatchObject({ logPartitions: 4, logPlacementTags: ['region:eu', 'ssd'] });
    expect(parse([], { TETHER_LOG_PARTITIONS: '256', TETHER_LOG_PLACEMENT_TAGS: 'az=1,rack/7' })).toMatchObject({ logPartitions: 256, logPlacementTags: ['az=1', 'rack/7'] });
    expect(parse(['--config', '/c.json'], {}, '{"log-partitions": 8, "log-placement-tags": "eu"}')).toMatchObject({ logPartitions: 8, logPlacementTags: ['eu'] });
    expect(parse(['--log-partitions', '2'], { TETHER_LOG_PARTITIONS: '3' }).logPartitions).toBe(2);
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
    expect(helpText()).toMatch(/--log-partitions\s+TETHER_LOG_PARTITIONS\s+streams the session log is spread over, 1 to 256; the same on every instance.*\(default 1\)/);
    expect(helpText()).toMatch(/--log-placement-tags\s+TETHER_LOG_PLACEMENT_TAGS\s+server tags/);
  });
});
