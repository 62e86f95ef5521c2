import { ConfigError } from './errors.js';

/**
 * Repeats, env lists and file arrays all arrive joined; blanks are dropped so
 * a trailing or doubled separator is harmless.
 */
export function list(text: string, separator = ','): string[] {
  return text.split(separator).map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * Whole numbers only: `Number()` alone would take `1e3`, `0x10`, `1.5` and
 * `''` (as 0). Surrounding whitespace is allowed, as env files often leave it.
 *
 * @throws ConfigError `invalid_config` naming the flag, the value and the range
 */
export function int(flag: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^-?[0-9]+$/.test(text.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`invalid --${flag} ${JSON.stringify(text)}; allowed: an integer from ${min} to ${max}`);
  }
  return n;
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/**
 * A bare number is milliseconds, the unit of every timer inside Tether;
 * units make long windows readable. `minMs` keeps a timer from being set so
 * low it spins or means "keep nothing".
 *
 * @throws ConfigError `invalid_config` naming the flag, the value and the minimum
 */
export function duration(flag: string, text: string, minMs: number): number {
  const match = /^([0-9]+)(ms|s|m|h)?$/.exec(text.trim());
  const n = match === null ? Number.NaN : Number(match[1]) * (UNIT_MS[match[2] ?? 'ms'] ?? Number.NaN);
  if (!Number.isSafeInteger(n) || n < minMs) {
    throw new ConfigError(`invalid --${flag} ${JSON.stringify(text)}; allowed: milliseconds or a duration like 30s, 15m, 24h, at least ${minMs} ms`);
  }
  return n;
}

/**
 * For names that end up in NATS subjects or stream names, where a stray `.`
 * or space would change their meaning; `allowed` says it in words, because a
 * regex in an error helps nobody.
 *
 * @throws ConfigError `invalid_config` naming the flag, the value and `allowed`
 */
export function matching(flag: string, text: string, re: RegExp, allowed: string): string {
  if (!re.test(text)) throw new ConfigError(`invalid --${flag} ${JSON.stringify(text)}; allowed: ${allowed}`);
  return text;
}
