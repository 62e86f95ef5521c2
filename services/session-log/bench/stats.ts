/** Small helpers for the gRPC benchmark: summaries and table printing. */
export interface Summary {
  readonly n: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly mean: number;
}

export function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
  return { n: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length) };
}

export const ms = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
export const int = (v: number): string => Math.round(v).toLocaleString('en-US');
export const pct = (v: number): string => `${Math.round(v * 100)} %`;

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export function progress(message: string): void {
  process.stderr.write(`[bench:grpc] ${message}\n`);
}
