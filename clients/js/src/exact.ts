/**
 * The exact integers behind the device's randomisers (common/mechanisms/exact_sampling.py,
 * common/mechanisms/privunit.py): every coin is an integer comparison against a
 * numerator over 2^32, computed here as the Python device computes it.
 *
 * The numerators come from exp/log of the config's epsilons. Math.exp and
 * Math.log may differ from the reference's libm by an ulp, which could move
 * a numerator by one when a ratio lies within an ulp of a boundary; the
 * tests compare them with the Python values on a grid. Whatever the ulps,
 * every numerator returned here is re-checked against e^eps with the exact
 * integer ratio before it is used (`privunitNumerator`, `grrKeepNumerator`).
 */

import { ConfigError } from "./errors.js";

export const DYADIC_BITS = 32;
export const DYADIC_ONE = 2 ** 32;

/** The largest A with A / 2^32 <= p (p in [0, 1]): exact (p 2^32 is an exact scaling of a double). */
export function dyadicBelow(p: number): number {
  if (!(p >= 0 && p <= 1)) throw new ConfigError(`a probability must be in [0, 1], got ${p}`);
  return Math.floor(p * DYADIC_ONE);
}

/** An upper bound (by 1e-12 relative) on log(num / den) for positive integers below 2^53. */
export function logRatioUpper(num: number, den: number): number {
  if (!(num > 0 && den > 0 && Number.isSafeInteger(num) && Number.isSafeInteger(den))) {
    throw new ConfigError(`log ratio needs positive safe integers, got ${num}/${den}`);
  }
  const value = Math.log(num) - Math.log(den);
  return value + 1e-12 * Math.max(1.0, Math.abs(value));
}

/** GRR over g outcomes keeps with A / 2^32: the largest A with A (g - 1) / (2^32 - A) <= e^eps. */
export function grrKeepNumerator(epsilon: number, outcomes: number): number {
  if (!(outcomes >= 2 && Number.isFinite(epsilon) && epsilon > 0)) {
    throw new ConfigError(`randomised response needs >= 2 outcomes and eps > 0, got ${outcomes}, ${epsilon}`);
  }
  const e = Math.exp(epsilon);
  let a = Math.min(dyadicBelow(e / (e + outcomes - 1)), DYADIC_ONE - 1);
  while (logRatioUpper(a * (outcomes - 1), DYADIC_ONE - a) > epsilon) a -= 1 + Math.floor(a / 1e9);
  return a;
}

/** PrivUnit's P(cap) = A / 2^32: the largest A with A (N - K) / (K (2^32 - A)) <= e^eps. */
export function privunitNumerator(epsilon: number, n: number, k: number): number {
  if (!(n >= 2 && k >= 1 && k < n && epsilon > 0)) throw new ConfigError(`no PrivUnit for N=${n}, K=${k}, eps=${epsilon}`);
  const e = Math.exp(epsilon);
  let a = Math.min(dyadicBelow((k * e) / (k * e + n - k)), DYADIC_ONE - 1);
  while (a > 0 && logRatioUpper(a * (n - k), k * (DYADIC_ONE - a)) > epsilon) a -= 1 + Math.floor(a / 1e9);
  if (a <= 0) throw new ConfigError(`no cap probability meets eps=${epsilon} for N=${n}, K=${k}`);
  // The cap must be likelier per index than its complement (else it is not PrivUnit).
  if (a * (n - k) < k * (DYADIC_ONE - a)) throw new ConfigError(`PrivUnit (N=${n}, K=${k}) cap is less likely per index than its complement`);
  return a;
}
