/**
 * PrivUnit on a public codebook (common/mechanisms/privunit.py): the device sends a
 * 64-bit nonce and the index of one of N public candidate directions.
 *
 * 1. Candidates V(key, nonce, index) (docs/protocol/public-randomness.md,
 *    "PrivUnit candidates"), fresh below d = 16: base = mix64(mix64(nonce xor
 *    key) xor index); words w_j = mix64(base + j gamma); the Box-Muller pairs
 *    of the words (the last sine dropped for odd d), divided by their norm.
 *    From d = 16 on, shared (common/mechanisms/privunit_codebook.py): the round's
 *    codebook row C_index = the fresh candidate (key, nonce 0, index), kept
 *    per round, under the nonce's signed permutation: V_i = s_i C[pi_i].
 * 2. The cap C(u): the K candidates with the largest <V_i, u>, ties to the
 *    lowest index; a NaN score counts as -inf.
 * 3. With probability A / 2^32 an index uniform on C(u), else one uniform on
 *    the other N - K.
 *
 * Given the nonce every index has probability A / (2^32 K) (in the cap) or
 * (2^32 - A) / (2^32 (N - K)) (outside) for every input, whatever the
 * floating point of the scores did: the exact ratio A (N - K) / (K (2^32 - A))
 * is checked against e^eps (`exact.privunitNumerator`).
 */

import { gaussianPair } from "./public-stream.js";
import { npNorm } from "./numsum.js";
import { type DeviceRandom, below, bernoulli, u64, uniform } from "./random.js";
import { type Pair, mix64Big, mix64Pair, toPair } from "./u64.js";

export interface PrivUnitParams {
  dim: number;
  epsilon: number;
  candidates: number;
  cap: number;
  /** P(cap) = capNumerator / 2^32. */
  capNumerator: number;
}

const G_HI = 0x9e3779b9;
const G_LO = 0x7f4a7c15;

/** From this dimension on, candidates are a round's shared codebook under a per-nonce signed permutation. */
export const SHARED_MIN_DIM = 16;
const TRANSFORM_TAG = 0xffffffffffffffffn;
const GAMMA = 0x9e3779b97f4a7c15n;
const MASK64 = 0xffffffffffffffffn;

/** The fresh candidate `index` of `nonce` under `key` (a unit vector), into `out` (length dim). */
export function freshCandidateInto(key: bigint, nonce: bigint, index: number, dim: number, out: Float64Array): void {
  const base = mix64Big(mix64Big(nonce ^ key) ^ BigInt(index));
  const b = toPair(base);
  const r: Pair = { hi: 0, lo: 0 };
  const w: Pair = { hi: 0, lo: 0 };
  const step: Pair = { hi: 0, lo: 0 };
  fillCandidate(b.hi, b.lo, dim, out, r, w, step);
}

/** A nonce's signed permutation: perm lists 0..dim-1 by (w_i >> 1, i), sign_i = -1 iff w_i is odd. */
export function nonceTransform(key: bigint, nonce: bigint, dim: number): { perm: Int32Array; signs: Float64Array } {
  const base = mix64Big(mix64Big(nonce ^ key) ^ TRANSFORM_TAG);
  const order: { k: bigint; i: number }[] = [];
  const signs = new Float64Array(dim);
  for (let i = 0; i < dim; i++) {
    const w = mix64Big((base + BigInt(i) * GAMMA) & MASK64);
    signs[i] = (w & 1n) === 1n ? -1 : 1;
    order.push({ k: w >> 1n, i });
  }
  order.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : a.i - b.i));
  return { perm: Int32Array.from(order, (o) => o.i), signs };
}

const books = new Map<string, Float64Array>();

/** The round's shared codebook (candidates x dim, row-major): row j = the fresh candidate (key, 0, j). Kept per round. */
export function codebook(key: bigint, candidates: number, dim: number): Float64Array {
  const id = `${key}/${candidates}/${dim}`;
  let book = books.get(id);
  if (book === undefined) {
    book = new Float64Array(candidates * dim);
    const row = new Float64Array(dim);
    for (let j = 0; j < candidates; j++) {
      freshCandidateInto(key, 0n, j, dim, row);
      book.set(row, j * dim);
    }
    if (books.size >= 8) books.delete(books.keys().next().value as string);
    books.set(id, book);
  }
  return book;
}

/**
 * Candidate `index` of `nonce` under `key`, as a unit vector written into
 * `out` (length dim): fresh below SHARED_MIN_DIM, else the codebook row under
 * the nonce's signed permutation.
 */
export function candidateInto(key: bigint, nonce: bigint, index: number, dim: number, out: Float64Array): void {
  if (dim < SHARED_MIN_DIM) {
    freshCandidateInto(key, nonce, index, dim, out);
    return;
  }
  const row = new Float64Array(dim);
  freshCandidateInto(key, 0n, index, dim, row);
  const { perm, signs } = nonceTransform(key, nonce, dim);
  for (let i = 0; i < dim; i++) out[i] = signs[i]! * row[perm[i]!]!;
}

/** The candidate whose SplitMix64 stream starts at base (bhi:blo), into out. */
function fillCandidate(bhi: number, blo: number, dim: number, out: Float64Array, r: Pair, w: Pair, step: Pair): void {
  // step = j * gamma mod 2^64, advanced by adding gamma (base + j gamma)
  step.hi = 0;
  step.lo = 0;
  for (let j = 0; 2 * j < dim; j++) {
    // w = base + j gamma
    const lo = blo + step.lo;
    const wlo = lo >>> 0;
    const whi = (bhi + step.hi + (lo > 0xffffffff ? 1 : 0)) >>> 0;
    mix64Pair(whi, wlo, w);
    gaussianPair(w.hi, w.lo, r);
    out[2 * j] = r.hi;
    if (2 * j + 1 < dim) out[2 * j + 1] = r.lo;
    const s = step.lo + G_LO;
    step.lo = s >>> 0;
    step.hi = (step.hi + G_HI + (s > 0xffffffff ? 1 : 0)) >>> 0;
  }
  const n = npNorm(out, 0, dim); // np.linalg.norm(g, axis=-1): numpy's pairwise order
  for (let i = 0; i < dim; i++) out[i] = out[i]! / n;
}

/** <V_i, u> for every candidate i of a nonce (the device's cap scores). */
export function scores(key: bigint, nonce: bigint, u: Float64Array, params: PrivUnitParams): Float64Array {
  const { dim, candidates } = params;
  const out = new Float64Array(candidates);
  if (dim >= SHARED_MIN_DIM) {
    // <s_i C_j[pi_i], u> = <C_j, w> with w[pi_i] = s_i u_i: one pass over the round's codebook
    const book = codebook(key, candidates, dim);
    const { perm, signs } = nonceTransform(key, nonce, dim);
    const w = new Float64Array(dim);
    for (let i = 0; i < dim; i++) w[perm[i]!] = signs[i]! * u[i]!;
    for (let j = 0, at = 0; j < candidates; j++, at += dim) {
      let s = 0;
      for (let m = 0; m < dim; m++) s += book[at + m]! * w[m]!;
      out[j] = s;
    }
    return out;
  }
  const v = new Float64Array(dim);
  const r: Pair = { hi: 0, lo: 0 };
  const w: Pair = { hi: 0, lo: 0 };
  const step: Pair = { hi: 0, lo: 0 };
  const b: Pair = { hi: 0, lo: 0 };
  const first: Pair = { hi: 0, lo: 0 };
  const nk = toPair(nonce ^ key);
  mix64Pair(nk.hi, nk.lo, first); // mix64(nonce xor key)
  for (let i = 0; i < candidates; i++) {
    // base = mix64(first xor i); i < 2^16 touches the low word only
    mix64Pair(first.hi, (first.lo ^ i) >>> 0, b);
    fillCandidate(b.hi, b.lo, dim, v, r, w, step);
    let s = 0;
    for (let j = 0; j < dim; j++) s += v[j]! * u[j]!;
    out[i] = s;
  }
  return out;
}

/** The cap C(u) as a mask: the K largest scores, ties broken by lowest index, NaN as -inf. */
export function capMask(sc: Float64Array, k: number): Uint8Array {
  const n = sc.length;
  const clean = Float64Array.from(sc, (x) => (Number.isNaN(x) ? -Infinity : x));
  // The K-th largest value: sort a copy descending (N <= 65536; O(N log N) is a few ms at most).
  const sorted = Float64Array.from(clean).sort();
  const kth = sorted[n - k]!;
  const mask = new Uint8Array(n);
  let room = k;
  for (let i = 0; i < n; i++) {
    if (clean[i]! > kth) {
      mask[i] = 1;
      room--;
    }
  }
  for (let i = 0; i < n && room > 0; i++) {
    if (clean[i] === kth) {
      mask[i] = 1;
      room--;
    }
  }
  return mask;
}

/** Randomised rounding of a ball point to +-x/|x| with P(+) = (1 + |x|) / 2 (0 goes to +-e1). */
export function roundToSphere(x: Float64Array, rnd: DeviceRandom): Float64Array {
  const norm = npNorm(x); // np.linalg.norm(x, axis=1)
  const u = new Float64Array(x.length);
  if (norm > 0) for (let i = 0; i < x.length; i++) u[i] = x[i]! / norm;
  else u[0] = 1.0;
  const plus = uniform(rnd) < (1 + Math.min(norm, 1.0)) / 2;
  if (!plus) for (let i = 0; i < u.length; i++) u[i] = -u[i]!;
  return u;
}

export interface Selection {
  nonce: bigint;
  index: number;
  /** Intermediates, for tests and audits: the sphere point, whether the cap was chosen, the cap. */
  u: Float64Array;
  inCap: boolean;
  cap: Uint8Array;
}

/**
 * The device side for one point x in the ball. Device randomness is drawn in
 * the Python device's order for one device: the sphere-rounding uniform, the
 * nonce, the cap coin, a pick below K, a pick below N - K (both picks are
 * drawn, one is used, as the vectorised reference does).
 */
export function select(x: Float64Array, params: PrivUnitParams, key: bigint, rnd: DeviceRandom): Selection {
  if (x.length !== params.dim) throw new RangeError(`PrivUnit calibrated for dim ${params.dim}, got ${x.length}`);
  const u = roundToSphere(x, rnd);
  const nonce = u64(rnd);
  const inCap = bernoulli(rnd, params.capNumerator);
  const pickIn = below(rnd, params.cap);
  const pickOut = below(rnd, params.candidates - params.cap);
  const cap = capMask(scores(key, nonce, u, params), params.cap);
  const want = inCap ? 1 : 0;
  let nth = inCap ? pickIn : pickOut;
  let index = -1;
  for (let i = 0; i < cap.length; i++) {
    if (cap[i] === want) {
      if (nth === 0) {
        index = i;
        break;
      }
      nth--;
    }
  }
  if (index < 0) throw new Error("PrivUnit: no candidate at the picked rank (a bug)");
  return { nonce, index, u, inCap, cap };
}

