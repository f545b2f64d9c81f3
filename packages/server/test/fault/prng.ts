/**
 * The fault harness's only source of chance: mulberry32, a 32-bit generator
 * small enough to read in full, so that a seed printed by one run replays the
 * same kill schedule and the same request sequence per client in another.
 * Math.random is never used: it cannot be seeded.
 */

/** A seeded stream of numbers in [0, 1). */
export interface Prng {
  readonly next: () => number
  /** An integer in [min, max], both included. */
  readonly int: (min: number, max: number) => number
}

export const mulberry32 = (seed: number): Prng => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return { next, int: (min, max) => min + Math.floor(next() * (max - min + 1)) }
}

/**
 * A separate stream per purpose (the kill schedule, each client's load), so
 * that adding a client does not shift the kill schedule of the same seed.
 */
export const substream = (seed: number, purpose: number): Prng =>
  mulberry32((Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(purpose + 1, 0x85ebca6b)) >>> 0)
