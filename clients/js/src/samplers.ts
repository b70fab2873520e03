/**
 * The exact samplers that leave a device (docs/protocol/samplers.md;
 * common/exact_sampling.py, common/distributed_noise.py): integers in,
 * integers out, every coin an integer comparison (bigint arithmetic).
 *
 * Each is vectorised exactly as the reference's numpy code is (whole-array
 * passes over the elements still running, in index order), so a device run on
 * a vector's private bytes makes the reference's reads in the reference's
 * order; integers come from `belowBig` (numpy's bounded Lemire per element).
 */

import { ConfigError } from "./errors.js";
import { type DeviceRandom, belowBig } from "./random.js";

export function bernoulliExpNeg(num: bigint[], den: bigint, rnd: DeviceRandom): boolean[] {
  const k = num.map(() => 1n);
  const running = num.map(() => true);
  for (;;) {
    const idx = running.flatMap((r, i) => (r ? [i] : []));
    if (idx.length === 0) break;
    const go = idx.map((i) => belowBig(rnd, den * k[i]!) < num[i]!);
    idx.forEach((i, j) => {
      if (go[j]) k[i] = k[i]! + 1n;
      else running[i] = false;
    });
  }
  return k.map((x) => x % 2n === 1n);
}

export function geometricExpNeg1(n: number, rnd: DeviceRandom): bigint[] {
  const v = new Array<bigint>(n).fill(0n);
  let running = Array.from({ length: n }, (_, i) => i);
  while (running.length) {
    const go = bernoulliExpNeg(running.map(() => 1n), 1n, rnd);
    const next: number[] = [];
    running.forEach((i, j) => {
      if (go[j]) {
        v[i] = v[i]! + 1n;
        next.push(i);
      }
    });
    running = next;
  }
  return v;
}

/** `size` integers with P(z) ~ exp(-|z| s / t) (CKS Alg. 2), in the reference's read order. */
export function discreteLaplace(t: bigint, s: bigint, size: number, rnd: DeviceRandom): bigint[] {
  if (!(t >= 1n && t <= 1n << 50n && s >= 1n)) throw new ConfigError(`discrete Laplace scale must be t/s with 1 <= t <= 2^50, s >= 1`);
  const out = new Array<bigint>(size).fill(0n);
  let todo = Array.from({ length: size }, (_, i) => i);
  while (todo.length) {
    const u = todo.map(() => belowBig(rnd, t));
    const keep = bernoulliExpNeg(u, t, rnd);
    const uk = u.filter((_, i) => keep[i]);
    const slots = todo.filter((_, i) => keep[i]);
    const g = geometricExpNeg1(uk.length, rnd);
    const y = uk.map((ui, i) => (ui + t * g[i]!) / s);
    const b = uk.map(() => belowBig(rnd, 2n));
    const ok = y.map((yi, i) => !(b[i] === 1n && yi === 0n));
    const done = new Set<number>();
    slots.forEach((slot, i) => {
      if (ok[i]) {
        out[slot] = (1n - 2n * b[i]!) * y[i]!;
        done.add(slot);
      }
    });
    todo = todo.filter((slot) => !done.has(slot));
  }
  return out;
}




export function bernoulliExpNegMixed(whole: bigint[], num: bigint[], den: bigint, rnd: DeviceRandom): boolean[] {
  const v = geometricExpNeg1(whole.length, rnd);
  const b = bernoulliExpNeg(num, den, rnd);
  return whole.map((w, i) => v[i]! >= w && b[i]!);
}

export function geometricHalf(n: number, rnd: DeviceRandom): number[] {
  const k = new Array<number>(n).fill(0);
  let running = Array.from({ length: n }, (_, i) => i);
  while (running.length) {
    running = running.filter(() => belowBig(rnd, 2n) === 1n);
    for (const i of running) k[i] = k[i]! + 1;
  }
  return k;
}

function poissonAtMostHalf(num: bigint, den: bigint, n: number, rnd: DeviceRandom): number[] {
  const out = new Array<number>(n).fill(0);
  let todo = Array.from({ length: n }, (_, i) => i);
  while (todo.length) {
    const k = geometricHalf(todo.length, rnd);
    const ok = k.map(() => true);
    const most = Math.max(0, ...k);
    for (let i = 1; i <= most; i++) {
      const idx = ok.flatMap((o, j) => (o && k[j]! >= i ? [j] : []));
      for (const j of idx) ok[j] = belowBig(rnd, den * BigInt(i)) < 2n * num;
    }
    todo.forEach((slot, j) => {
      if (ok[j]) out[slot] = k[j]!;
    });
    todo = todo.filter((_, j) => !ok[j]);
  }
  return out;
}

export function poissonRational(num: bigint, den: bigint, size: number, rnd: DeviceRandom): number[] {
  const out = new Array<number>(size).fill(0);
  const pieces = (2n * num + den - 1n) / den;
  for (let p = 0n; p < pieces; p++) {
    const draw = poissonAtMostHalf(num, den * pieces, size, rnd);
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
  let todo = Array.from({ length: size }, (_, i) => i);
  while (todo.length) {
    const y = discreteLaplace(t, 1n, todo.length, rnd);
    const abs = y.map((v) => (v < 0n ? -v : v));
    const inside = abs.map((a) => a <= T);
    const ins = inside.flatMap((b, i) => (b ? [i] : []));
    const nums = ins.map((i) => (abs[i]! * t - s) ** 2n);
    const g = geometricExpNeg1(ins.length, rnd);
    const b = bernoulliExpNeg(nums.map((x) => x % den), den, rnd);
    const accept = new Array<boolean>(todo.length).fill(false);
    ins.forEach((i, n) => (accept[i] = g[n]! >= nums[n]! / den && b[n]!));
    todo.forEach((slot, i) => {
      if (accept[i]) out[slot] = y[i]!;
    });
    todo = todo.filter((_, i) => !accept[i]);
  }
  return out;
}
