/**
 * Amplification by shuffling (Feldman, McMillan, Talwar 2021; common/privacy/accounting.py):
 * what a device checks before it randomises at a shuffle round's local eps0,
 * so that a hostile server cannot publish an eps0 larger than its central
 * claim allows (docs/protocol/tree.md, "Checks on the config").
 *
 * - `closedFormEpsilon`: Theorem 3.1's closed form;
 * - `numericalDelta`: the clone reduction of Theorem 3.2, evaluated exactly as
 *   the reference does (binomial weights of Bin(n - 1, e^-eps0) within 12
 *   standard deviations plus the rest as a tail; per count, two upper tails of
 *   Bin(c, 1/2)). Binomial probabilities use Loader's saddle-point form
 *   (stirlerr and bd0, as R and scipy's Boost do), accurate to ~1e-15
 *   relative; the reference compares with a 1e-6 relative slack.
 */

import { ConfigError } from "./errors.js";

const LN_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

/** log(n!) - log(sqrt(2 pi n) (n / e)^n) for an integer n >= 0 (Stirling's error). */
export function stirlerr(n: number): number {
  if (n <= 15) {
    if (n === 0) return 0; // not used at 0 (the x = 0 and x = n cases are handled apart)
    let lf = 0;
    for (let i = 2; i <= n; i++) lf += Math.log(i);
    return lf - (n + 0.5) * Math.log(n) + n - LN_SQRT_2PI;
  }
  const s0 = 1 / 12, s1 = 1 / 360, s2 = 1 / 1260, s3 = 1 / 1680, s4 = 1 / 1188;
  const nn = n * n;
  if (n > 500) return (s0 - s1 / nn) / n;
  if (n > 80) return (s0 - (s1 - s2 / nn) / nn) / n;
  if (n > 35) return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n;
  return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n;
}

/** x log(x / np) + np - x, computed without cancellation near x = np (Loader's bd0). */
export function bd0(x: number, np: number): number {
  if (Math.abs(x - np) < 0.1 * (x + np)) {
    let v = (x - np) / (x + np);
    let s = (x - np) * v;
    let ej = 2 * x * v;
    v = v * v;
    for (let j = 1; j < 1000; j++) {
      ej *= v;
      const s1 = s + ej / (2 * j + 1);
      if (s1 === s) return s1;
      s = s1;
    }
    return s;
  }
  return x * Math.log(x / np) + np - x;
}

/** P(Bin(n, p) = x), q = 1 - p. */
export function binomPmf(x: number, n: number, p: number, q = 1 - p): number {
  if (x < 0 || x > n) return 0;
  if (p === 0) return x === 0 ? 1 : 0;
  if (q === 0) return x === n ? 1 : 0;
  if (x === 0) return Math.exp(n * Math.log1p(-p));
  if (x === n) return Math.exp(n * Math.log(p));
  const lc = stirlerr(n) - stirlerr(x) - stirlerr(n - x) - bd0(x, n * p) - bd0(n - x, n * q);
  const lf = Math.log(2 * Math.PI) + Math.log(x) + Math.log1p(-x / n);
  return Math.exp(lc - 0.5 * lf);
}

/** P(Bin(c, 1/2) >= k). */
export function halfUpperTail(k: number, c: number): number {
  if (k <= 0) return 1;
  if (k > c) return 0;
  const upper = (from: number): number => {
    // terms decrease from `from` (> c / 2) upward
    let term = binomPmf(from, c, 0.5, 0.5);
    let sum = term;
    for (let j = from; j < c && term > sum * 1e-18; j++) {
      term *= (c - j) / (j + 1);
      sum += term;
    }
    return sum;
  };
  if (2 * k > c) return upper(k);
  return 1 - upper(c - k + 1); // symmetry: P(X >= k) = 1 - P(X >= c - k + 1)
}

function check(eps0: number, n: number): void {
  if (!(Number.isFinite(eps0) && eps0 > 0)) throw new ConfigError(`local epsilon must be finite and > 0, got ${eps0}`);
  if (!(n >= 2)) throw new ConfigError(`amplification needs at least 2 shuffled messages, got n=${n}`);
}

/** The largest eps0 Theorem 3.1 applies to: log(n / (16 log(4 / delta))). */
export function closedFormMaxEps0(n: number, delta: number): number {
  return Math.log(n / (16 * Math.log(4 / delta)));
}

/** Central eps of n shuffled eps0-DP messages by the closed form; null where it does not apply. */
export function closedFormEpsilon(eps0: number, n: number, delta: number): number | null {
  check(eps0, n);
  if (!(delta > 0 && delta < 1)) throw new ConfigError(`delta must be in (0, 1), got ${delta}`);
  if (eps0 > closedFormMaxEps0(n, delta)) return null;
  const e0 = Math.exp(eps0);
  const ab = 8 * Math.sqrt((e0 * Math.log(4 / delta)) / n) + (8 * e0) / n;
  const factor = -Math.expm1(-eps0) / (1 + Math.exp(-eps0 - Math.log1p(ab)));
  return Math.min(eps0, Math.log1p(factor * ab));
}

/** Smallest delta for which n shuffled eps0-DP messages are (eps, delta)-DP (FMT'21 Thm 3.2, clones). */
export function numericalDelta(eps0: number, n: number, eps: number): number {
  check(eps0, n);
  if (eps >= eps0) return 0;
  if (eps < 0) throw new ConfigError(`eps must be >= 0, got ${eps}`);
  const p = Math.exp(-eps0);
  const q = Math.exp(eps0) / (Math.exp(eps0) + 1);
  const ee = Math.exp(eps);
  const mean = (n - 1) * p;
  const sd = Math.sqrt((n - 1) * p * (1 - p));
  const lo = Math.max(0, Math.trunc(mean - 12 * sd) - 1);
  const hi = Math.min(n - 1, Math.trunc(mean + 12 * sd) + 2);
  const t = (ee * q - (1 - q)) / (q - ee * (1 - q));
  let wsum = 0;
  let total = 0;
  for (let c = lo; c <= hi; c++) {
    const w = binomPmf(c, n - 1, p, 1 - p);
    wsum += w;
    const aStar = Math.floor((t * (c + 1)) / (1 + t)) + 1;
    const s1 = halfUpperTail(aStar - 1, c);
    const s0 = halfUpperTail(aStar, c);
    const perC = q * s1 + (1 - q) * s0 - ee * ((1 - q) * s1 + q * s0);
    total += w * Math.max(perC, 0);
  }
  const tail = Math.max(0, 1 - wsum);
  return Math.min(1, total + tail);
}

export const BOUNDS = ["fmt21-numerical", "fmt21-closed-form"] as const;

/**
 * Whether local eps0 shuffled in batches of minBatch gives (centralEpsilon, delta)
 * under the named bound, with the reference's tolerances (common/kinds/tree.py `_check_shuffle`).
 */
export function shuffleClaimHolds(eps0: number, minBatch: number, centralEpsilon: number, delta: number, bound: string): boolean {
  if (bound === "fmt21-numerical") return numericalDelta(eps0, minBatch, centralEpsilon) <= delta * (1 + 1e-6);
  if (bound === "fmt21-closed-form") {
    const e = closedFormEpsilon(eps0, minBatch, delta);
    return e !== null && e <= centralEpsilon + 1e-9;
  }
  throw new ConfigError(`amplification_bound must be one of ${BOUNDS.join(", ")}, got ${JSON.stringify(bound)}`);
}
