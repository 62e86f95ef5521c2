/**
 * A seeded PRNG for the benchmarks and the chaos harness: the same seed gives
 * the same samples, fault schedule and client choices from run to run.
 */

/** A seeded generator (mulberry32). */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Integer in [min, max], both included. */
  int(min: number, max: number): number;
  /** True with probability `p`. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** A new generator derived from this one and `salt`, for an independent stream of choices. */
  fork(salt: number): Rng;
}

export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const rng: Rng = {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => {
      if (items.length === 0) throw new RangeError('pick from an empty list');
      return items[Math.floor(next() * items.length)]!;
    },
    fork: (salt) => createRng((Math.imul(seed ^ 0x9e3779b9, 31) + Math.imul(salt + 1, 0x85ebca6b)) >>> 0),
  };
  return rng;
}
