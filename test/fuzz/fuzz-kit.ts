import fc from 'fast-check';

/**
 * Shared settings of the fuzz suites. Every property runs with one fixed seed
 * (printed), so a failure is replayed by running the file again; set
 * `TETHER_FUZZ_SEED` to explore other inputs and `TETHER_FUZZ_RUNS` to scale
 * every property's run count (a factor, default 1).
 */
export const FUZZ_SEED = intFromEnv('TETHER_FUZZ_SEED', 0x7e7e4);
const RUNS_FACTOR = Number(process.env['TETHER_FUZZ_RUNS'] ?? '1');

/** fast-check parameters of one property: the fixed seed and `runs` (times TETHER_FUZZ_RUNS, rounded up: `npm run fuzz -- --cases N` runs at least N); a failure is shrunk to a minimal case. */
export function fuzzParams<Ts>(runs: number): fc.Parameters<Ts> {
  return { seed: FUZZ_SEED, numRuns: Math.max(1, Math.ceil(runs * (Number.isFinite(RUNS_FACTOR) && RUNS_FACTOR > 0 ? RUNS_FACTOR : 1))) };
}

/**
 * Counts the cases each property executed (shrinking included), so the
 * summary printed at the end of a file is what actually ran.
 */
export class CaseCounter {
  readonly #counts = new Map<string, number>();
  readonly #notes = new Map<string, Map<string, number>>();
  readonly #slowestMs = new Map<string, number>();

  hit(property: string): void {
    this.#counts.set(property, (this.#counts.get(property) ?? 0) + 1);
  }

  /** Tallies an outcome (status, verdict, gRPC code…) of a property, to show the cases were not all alike. */
  note(property: string, outcome: string): void {
    const notes = this.#notes.get(property) ?? new Map<string, number>();
    notes.set(outcome, (notes.get(outcome) ?? 0) + 1);
    this.#notes.set(property, notes);
  }

  /** Records how long one answer took; the summary prints each property's slowest (bounds in the stacks are for hangs, not latency). */
  time(property: string, elapsedMs: number): void {
    this.#slowestMs.set(property, Math.max(this.#slowestMs.get(property) ?? 0, elapsedMs));
  }

  count(property: string): number {
    return this.#counts.get(property) ?? 0;
  }

  outcomes(property: string): ReadonlyMap<string, number> {
    return this.#notes.get(property) ?? new Map();
  }

  get total(): number {
    let sum = 0;
    for (const n of this.#counts.values()) sum += n;
    return sum;
  }

  summary(file: string, elapsedMs: number): string {
    const lines = [`fuzz ${file}: seed ${FUZZ_SEED}, ${this.total} cases in ${(elapsedMs / 1000).toFixed(1)} s`];
    for (const [name, n] of this.#counts) {
      const outcomes = [...(this.#notes.get(name) ?? new Map<string, number>())]
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k}×${v}`)
        .join(' ');
      const slowest = this.#slowestMs.get(name);
      lines.push(`  ${name}: ${n} cases${slowest === undefined ? '' : `, slowest answer ${slowest.toFixed(0)} ms`}${outcomes === '' ? '' : ` (${outcomes})`}`);
    }
    return lines.join('\n');
  }
}

/** A short description of a value for failure messages: strings and buffers cut to `max` characters. */
export function preview(value: unknown, max = 300): string {
  let text: string;
  if (value === undefined) text = 'undefined';
  else if (value instanceof Uint8Array) text = `<${value.length} bytes> ${Buffer.from(value.subarray(0, max / 2)).toString('hex')}`;
  else if (typeof value === 'string') text = JSON.stringify(value);
  else {
    try {
      text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? `<${v.length} bytes>` : v)) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  return text.length > max ? `${text.slice(0, max)}… (${text.length} chars)` : text;
}

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** An error as a report line: its name, its `code` when it has one, its message (cut). */
export function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return `${err.name}${typeof code === 'string' ? ` ${code}` : ''}: ${err.message.slice(0, 300)}`;
  }
  return `a non-Error ${preview(err, 200)}`;
}
