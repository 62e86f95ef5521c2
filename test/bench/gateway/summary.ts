/**
 * `summarize` from ../stats.ts plus the 95th percentile, which the gateway
 * tables print beside p50 and p99 (DESIGN section 12 quotes p50/p95/p99).
 */
import { percentile, summarize } from '../stats.js';
import type { Summary } from '../stats.js';

export interface Summary95 extends Summary {
  readonly p95: number;
}

export function summarize95(samples: readonly number[]): Summary95 {
  return { ...summarize(samples), p95: percentile([...samples].sort((a, b) => a - b), 95) };
}
