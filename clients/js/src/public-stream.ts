/**
 * The public random stream of a round (docs/protocol/public-randomness.md):
 * every public object a device needs is read from SHAKE-256 over
 * (protocol version u32 LE, seed u64 LE, label length u32 LE, label UTF-8).
 *
 * Words, uniforms, signs and integers are bit exact (integer operations and
 * correctly rounded * on exact dyadics); Gaussians use Math.log/cos/sin,
 * which the spec allows to differ from the reference by at most 4 ulps each
 * (the tests measure the distance to the Python reference in ulps).
 *
 * Device-private randomness never comes from here (see `random.ts`).
 */

import { shake256 } from "@noble/hashes/sha3.js";
import { MASK64, type Pair, readU64 } from "./u64.js";
import { ConfigError } from "./errors.js";

export const PROTOCOL_VERSION = 2;
/** The protocol versions this device speaks. */
export const PROTOCOLS: readonly number[] = [2];

const TWO_POW_64 = 1n << 64n;
const TWO_PI = 2 * Math.PI; // the double nearest 2 pi, as in the reference
const TWO_M32 = 2 ** -32;
const TWO_M53 = 2 ** -53;

/** The SHAKE-256 input for (seed, label). */
export function encode(seed: bigint, label: string, version: number = PROTOCOL_VERSION): Uint8Array {
  if (seed < 0n || seed >= TWO_POW_64) {
    throw new ConfigError(`a public stream's seed must be an integer in [0, 2^64), got ${seed}`);
  }
  const raw = new TextEncoder().encode(label);
  const out = new Uint8Array(16 + raw.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, version, true);
  view.setBigUint64(4, seed, true);
  view.setUint32(12, raw.length, true);
  out.set(raw, 16);
  return out;
}

/** The first n bytes of the stream (seed, label). */
export function streamBytes(seed: bigint, label: string, n: number): Uint8Array {
  return shake256(encode(seed, label), { dkLen: n });
}

/** The first n little-endian uint64 words of the stream. */
export function words(seed: bigint, label: string, n: number): bigint[] {
  const b = streamBytes(seed, label, 8 * n);
  const out: bigint[] = new Array<bigint>(n);
  for (let i = 0; i < n; i++) out[i] = readU64(b, 8 * i);
  return out;
}

/** The stream's first word: a 64-bit public key. */
export function key64(seed: bigint, label: string): bigint {
  return words(seed, label, 1)[0]!;
}

/** Words as (hi, lo) uint32 pairs in one array: hi at 2i, lo at 2i + 1. */
export function wordPairs(seed: bigint, label: string, n: number): Uint32Array {
  const b = streamBytes(seed, label, 8 * n);
  const out = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const o = 8 * i;
    out[2 * i + 1] = (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
    out[2 * i] = (b[o + 4]! | (b[o + 5]! << 8) | (b[o + 6]! << 16) | (b[o + 7]! << 24)) >>> 0;
  }
  return out;
}

/** (w >> 11) 2^-53 for w = hi:lo: exact in binary64. */
export function uniformOf(hi: number, lo: number): number {
  return ((hi >>> 0) * 2097152 + ((lo >>> 0) >>> 11)) * TWO_M53;
}

/** n uniforms in [0, 1), one word each. */
export function uniforms(seed: bigint, label: string, n: number): Float64Array {
  const w = wordPairs(seed, label, n);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = uniformOf(w[2 * i]!, w[2 * i + 1]!);
  return out;
}

/** n signs: bit i of the byte stream (LSB first), 0 -> +1, 1 -> -1. */
export function signs(seed: bigint, label: string, n: number): Int8Array {
  const b = streamBytes(seed, label, (n + 7) >> 3);
  const out = new Int8Array(n);
  for (let i = 0; i < n; i++) out[i] = ((b[i >> 3]! >> (i & 7)) & 1) === 1 ? -1 : 1;
  return out;
}

/** n integers uniform in [0, bound) (1 <= bound <= 2^64), by rejection on the words in order. */
export function integersBelow(seed: bigint, label: string, bound: bigint, n: number): bigint[] {
  if (bound < 1n || bound > TWO_POW_64) {
    throw new ConfigError(`integersBelow needs 1 <= bound <= 2^64, got ${bound}`);
  }
  const limit = TWO_POW_64 - (TWO_POW_64 % bound);
  const out: bigint[] = [];
  let want = n + 16 + Math.floor(n / 8);
  // The stream is an XOF: a longer read has the shorter one as its prefix, so
  // reading more and restarting the scan gives the same sequence.
  while (out.length < n) {
    out.length = 0;
    const w = words(seed, label, want);
    for (const x of w) {
      if (x < limit) out.push(x % bound);
      if (out.length === n) break;
    }
    want *= 2;
  }
  return out;
}

/** The Gaussian pair of one word (hi:lo), Box-Muller in binary64, into r (hi: cos, lo: sin). */
export function gaussianPair(hi: number, lo: number, r: Pair): void {
  const u1 = ((hi >>> 0) + 0.5) * TWO_M32;
  const u2 = (lo >>> 0) * TWO_M32;
  const rad = Math.sqrt(-2.0 * Math.log(u1));
  const ang = TWO_PI * u2;
  r.hi = rad * Math.cos(ang);
  r.lo = rad * Math.sin(ang);
}

/** Gaussians from word pairs into out (length n <= 2 * words): the last sine dropped when n is odd. */
export function boxMullerInto(w: Uint32Array, out: Float64Array, n: number, offset = 0): void {
  const r: Pair = { hi: 0, lo: 0 };
  for (let i = 0; 2 * i < n; i++) {
    gaussianPair(w[2 * i]!, w[2 * i + 1]!, r);
    out[offset + 2 * i] = r.hi;
    if (2 * i + 1 < n) out[offset + 2 * i + 1] = r.lo;
  }
}

/** n standard Gaussians (row-major for a matrix of n entries). */
export function gaussians(seed: bigint, label: string, n: number): Float64Array {
  const w = wordPairs(seed, label, (n + 1) >> 1);
  const out = new Float64Array(n);
  boxMullerInto(w, out, n);
  return out;
}

/** Each row of a (rows x cols) row-major matrix divided by its Euclidean norm. */
export function unitRows(g: Float64Array, cols: number): Float64Array {
  const out = new Float64Array(g.length);
  for (let o = 0; o < g.length; o += cols) {
    let s = 0;
    for (let j = 0; j < cols; j++) s += g[o + j]! * g[o + j]!;
    const norm = Math.max(Math.sqrt(s), 1e-300);
    for (let j = 0; j < cols; j++) out[o + j] = g[o + j]! / norm;
  }
  return out;
}

export { MASK64 };
