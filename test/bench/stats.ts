/** Small numeric and formatting helpers for benchmark reports. */

export interface Summary {
  readonly n: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

/** Nearest-rank percentile of an ascending array (`p` in 0..100). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((sum, x) => sum + x, 0) / Math.max(1, sorted.length);
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean,
  };
}

export function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}

export function ms(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 100) return value.toFixed(0);
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

export function int(value: number): string {
  return Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : 'n/a';
}

export function ratio(value: number): string {
  return Number.isFinite(value) ? `${value >= 10 ? value.toFixed(0) : value.toFixed(2)}×` : 'n/a';
}

/** A markdown table, columns padded so it also reads well in a terminal. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

let progressTag = '';

/** Tags every later progress line (e.g. with the server being measured); '' for none. */
export function setProgressTag(tag: string): void {
  progressTag = tag === '' ? '' : ` ${tag}`;
}

/** Progress goes to stderr so stdout holds only the results. */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}${progressTag}] ${message}\n`);
}
