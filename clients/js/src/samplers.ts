/**
 * The exact samplers that leave a device (docs/protocol/samplers.md;
 * common/mechanisms/exact_sampling.py, common/mechanisms/distributed_noise.py): integers in,
 * integers out, every coin an integer comparison (bigint arithmetic).
 *
 * Each makes the reads of docs/protocol/samplers.md in its order (the
 * reference's numpy passes: batches of proposals, runs of one trial stream,
 * a factorial stop from one U(20!)), so a device run on a vector's private
 * bytes makes the reference's reads in the reference's order; integers come
 * from `belowBig` (numpy's bounded Lemire per element).
 */

import { ConfigError } from "./errors.js";
import { type DeviceRandom, belowBig } from "./random.js";

/** The factorial stop's uniform: Z = U(20!) decides the first 20 coins Bernoulli(1 / k) at once. */
export const STOP_LEVELS = 20;
export const STOP_RANGE = 2432902008176640000n; // 20!
/** STOP_THRESHOLDS[k] = 20! / k! for k = 0 .. 20 (J > k iff Z < 20! / k!). */
const STOP_THRESHOLDS: bigint[] = (() => {
  const out: bigint[] = [STOP_RANGE];
  for (let k = 1n; k <= 20n; k++) out.push(out[out.length - 1]! / k);
  return out;
})();

/** Proposals a pass reads when m outputs are missing (trials per block of a geometric stream): m + floor(5 m / 8) + 16. */
export function oversampled(m: number): number {
  return m + Math.floor((5 * m) / 8) + 16;
}

/** Trials per block of a Poisson proposal stream when m runs are missing: m + floor(m / 8) + 16. */
export function poissonBlock(m: number): number {
  return m + Math.floor(m / 8) + 16;
}

/**
 * n factorial stops J (P(J > k) = 1 / k!): Z = U(20!) per element, J = the first k >= 2 with
 * Z >= 20! / k!; then, in index order, each Z = 0 (J > 20) continues: k = 21; while U(k) = 0: k += 1; J = k.
 */
export function factorialStops(n: number, rnd: DeviceRandom): number[] {
  const z = Array.from({ length: n }, () => belowBig(rnd, STOP_RANGE));
  const j = z.map((zi) => {
    let k = 2;
    while (k <= STOP_LEVELS && zi < STOP_THRESHOLDS[k]!) k++;
    return k;
  });
  z.forEach((zi, i) => {
    if (zi !== 0n) return;
    let k = STOP_LEVELS + 1;
    while (belowBig(rnd, BigInt(k)) === 0n) k++;
    j[i] = k;
  });
  return j;
}

/**
 * n run lengths of one stream of i.i.d. trials (the successes before each failure), read in blocks of
 * block(still missing) trials; a run reaching a block's end continues in the next block.
 */
export function runs(n: number, trials: (size: number) => boolean[], block: (m: number) => number): number[] {
  const out = new Array<number>(n).fill(0);
  let done = 0;
  let carry = 0;
  while (done < n) {
    const need = n - done;
    const ok = trials(block(need));
    let f = 0;
    let last = -1;
    for (let i = 0; i < ok.length && f < need; i++) {
      if (ok[i]) continue;
      out[done + f] = i - last - 1 + (f === 0 ? carry : 0);
      last = i;
      f++;
    }
    if (f) {
      done += f;
      carry = ok.length - 1 - last;
    } else carry += ok.length;
  }
  return out;
}

/** Given coin 1 passed: K = min(J_A, J), J - 2 draws A_2 .. A_{J-1} = U(den) per element (element by element, all read). */
function firstStops(num: bigint[], stops: number[], den: bigint, rnd: DeviceRandom): number[] {
  return stops.map((j, i) => {
    let k = j;
    for (let c = 2; c < j; c++) {
      const a = belowBig(rnd, den);
      if (k === j && a >= num[i]!) k = c;
    }
    return k;
  });
}

/**
 * Bernoulli(exp(-num / den)) per element, 0 <= num <= den (CKS Alg. 1 with its coins split:
 * docs/protocol/samplers.md): A_1 = U(den) for every element; for those with A_1 < num, a factorial
 * stop J each, then their A_2 .. A_{J-1}.
 */
export function bernoulliExpNeg(num: bigint[], den: bigint, rnd: DeviceRandom): boolean[] {
  if (den < 1n || num.some((x) => x < 0n || x > den)) throw new ConfigError(`bernoulliExpNeg needs 0 <= num <= den`);
  const first = num.map((x) => belowBig(rnd, den) < x);
  const go = first.flatMap((f, i) => (f ? [i] : []));
  const k = num.map(() => 1);
  const stops = firstStops(go.map((i) => num[i]!), factorialStops(go.length, rnd), den, rnd);
  go.forEach((i, n) => (k[i] = stops[n]!));
  return k.map((x) => x % 2 === 1);
}

/** V with P(V = v) = (1 - 1/e) e^-v: runs of Bernoulli(exp(-1)) trials (J odd), blocks of oversampled(m). */
export function geometricExpNeg1(n: number, rnd: DeviceRandom): bigint[] {
  return runs(n, (size) => factorialStops(size, rnd).map((j) => j % 2 === 1), oversampled).map((v) => BigInt(v));
}

/** `size` integers with P(z) ~ exp(-|z| s / t) (CKS Alg. 2, batched passes), in the reference's read order. */
export function discreteLaplace(t: bigint, s: bigint, size: number, rnd: DeviceRandom): bigint[] {
  if (!(t >= 1n && t <= 1n << 50n && s >= 1n)) throw new ConfigError(`discrete Laplace scale must be t/s with 1 <= t <= 2^50, s >= 1`);
  const out = new Array<bigint>(size).fill(0n);
  let done = 0;
  while (done < size) {
    const m = size - done;
    const w = Array.from({ length: oversampled(m) }, () => belowBig(rnd, 2n * t));
    const u = w.map((x) => x >> 1n);
    const keep = bernoulliExpNeg(u, t, rnd);
    const idx = keep.flatMap((k, i) => (k ? [i] : [])).slice(0, m);
    const v = geometricExpNeg1(idx.length, rnd);
    idx.forEach((i, n) => {
      const y = (u[i]! + t * v[n]!) / s;
      const neg = (w[i]! & 1n) === 1n;
      if (!(neg && y === 0n)) out[done++] = neg ? -y : y;
    });
  }
  return out;
}

/** Bernoulli(exp(-(w + num / den))): V (geometric, ratio 1/e) for the w >= 1 only, in order, then Alg. 1 for all. */
export function bernoulliExpNegMixed(whole: bigint[], num: bigint[], den: bigint, rnd: DeviceRandom): boolean[] {
  const need = whole.flatMap((w, i) => (w > 0n ? [i] : []));
  const v = geometricExpNeg1(need.length, rnd);
  const ok = whole.map(() => true);
  need.forEach((i, n) => (ok[i] = v[n]! >= whole[i]!));
  const b = bernoulliExpNeg(num, den, rnd);
  return ok.map((o, i) => o && b[i]!);
}

/** Poisson(num / den) < 1 (von Neumann): K geometric with ratio num / den (runs of U(den) < num), accepted iff K <= 1 or J > K. */
function poissonBelowOne(num: bigint, den: bigint, n: number, rnd: DeviceRandom): number[] {
  const out = new Array<number>(n).fill(0);
  let todo = Array.from({ length: n }, (_, i) => i);
  while (todo.length) {
    const k = runs(todo.length, (size) => Array.from({ length: size }, () => belowBig(rnd, den) < num), poissonBlock);
    const ok = k.map(() => true);
    const big = k.flatMap((x, i) => (x >= 2 ? [i] : []));
    if (big.length) {
      const j = factorialStops(big.length, rnd);
      big.forEach((i, n) => (ok[i] = j[n]! > k[i]!));
    }
    todo.forEach((slot, i) => {
      if (ok[i]) out[slot] = k[i]!;
    });
    todo = todo.filter((_, i) => !ok[i]);
  }
  return out;
}

export function poissonRational(num: bigint, den: bigint, size: number, rnd: DeviceRandom): number[] {
  const out = new Array<number>(size).fill(0);
  const pieces = (2n * num + den - 1n) / den;
  for (let p = 0n; p < pieces; p++) {
    const draw = poissonBelowOne(num, den * pieces, size, rnd);
    draw.forEach((x, i) => (out[i] = out[i]! + x));
  }
  return out;
}

/** Exact Polya / NB(1 / rDen, 1 - exp(-s / t)) draws from the points j <= clip of their Poisson process. */
export function polya(rDen: number, s: bigint, t: bigint, clip: number, size: number, rnd: DeviceRandom): bigint[] {
  const blocks = BigInt(clip).toString(2).length - (clip === 0 ? 1 : 0);
  const counts = poissonRational(BigInt(blocks), BigInt(rDen), size, rnd);
  const owner: number[] = counts.flatMap((c, i) => new Array<number>(c).fill(i));
  const low = owner.map(() => 1n << belowBig(rnd, BigInt(Math.max(blocks, 1))));
  const j = owner.length ? low.map((l) => l + belowBig(rnd, l)) : low;
  const keep = j.map((x) => x <= BigInt(clip));
  let idx = keep.flatMap((k, i) => (k ? [i] : []));
  if (idx.length) {
    const draws = idx.map((i) => belowBig(rnd, j[i]!) < low[i]!);
    idx.forEach((i, n) => (keep[i] = draws[n]!));
  }
  idx = keep.flatMap((k, i) => (k ? [i] : []));
  const whole = idx.map((i) => (j[i]! / t) * s + ((j[i]! % t) * s) / t);
  const num = idx.map((i) => ((j[i]! % t) * s) % t);
  const accepted = bernoulliExpNegMixed(whole, num, t, rnd);
  idx.forEach((i, n) => (keep[i] = accepted[n]!));
  const out = new Array<bigint>(size).fill(0n);
  owner.forEach((o, i) => {
    if (keep[i]) out[o] = out[o]! + j[i]!;
  });
  return out;
}

function isqrt(n: bigint): bigint {
  if (n < 2n) return n;
  let x = BigInt(Math.floor(Math.sqrt(Number(n))));
  while (x * x > n) x--;
  while ((x + 1n) * (x + 1n) <= n) x++;
  return x;
}

/** Exact discrete Gaussian N_Z(0, S) truncated to |z| <= clip (CKS Alg. 3), in the reference's read order. */
export function discreteGaussian(sigmaSq: number, clip: number, size: number, rnd: DeviceRandom): bigint[] {
  const s = BigInt(sigmaSq);
  const t = isqrt(s) + 1n;
  const T = BigInt(clip);
  const den = 2n * s * t * t;
  const out = new Array<bigint>(size).fill(0n);
  let done = 0;
  while (done < size) {
    const m = size - done;
    const y = discreteLaplace(t, 1n, oversampled(m), rnd).filter((v) => (v < 0n ? -v : v) <= T);
    const nums = y.map((v) => ((v < 0n ? -v : v) * t - s) ** 2n);
    const accept = bernoulliExpNegMixed(nums.map((x) => x / den), nums.map((x) => x % den), den, rnd);
    for (let i = 0; i < y.length && done < size; i++) if (accept[i]) out[done++] = y[i]!;
  }
  return out;
}
