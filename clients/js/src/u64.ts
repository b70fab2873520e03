/**
 * Unsigned 64-bit integers mod 2^64, two ways:
 *
 * - as `bigint` (`asU64`), for values that cross an API (keys, nonces, seeds):
 *   simple and obviously right;
 * - as a (hi, lo) pair of uint32 numbers, for the hot path (SplitMix64 over
 *   every PrivUnit candidate: N x ceil(d/2) hashes a report), where BigInt
 *   arithmetic is two orders of magnitude slower.
 *
 * The pair functions return their result in `r.hi` / `r.lo` of a caller's
 * scratch object (no allocation per call). The tests check every pair
 * function against the bigint definition.
 */

export const MASK64 = (1n << 64n) - 1n;
export const GAMMA = 0x9e3779b97f4a7c15n;
const M1 = 0xbf58476d1ce4e5b9n;
const M2 = 0x94d049bb133111ebn;

export function asU64(x: bigint): bigint {
  return x & MASK64;
}

/** SplitMix64's step on a bigint: add gamma, then the finaliser (a bijection of uint64). */
export function mix64Big(x: bigint): bigint {
  let z = (x + GAMMA) & MASK64;
  z = ((z ^ (z >> 30n)) * M1) & MASK64;
  z = ((z ^ (z >> 27n)) * M2) & MASK64;
  return z ^ (z >> 31n);
}

export interface Pair {
  hi: number;
  lo: number;
}

export function toPair(x: bigint, r: Pair = { hi: 0, lo: 0 }): Pair {
  r.hi = Number((x >> 32n) & 0xffffffffn);
  r.lo = Number(x & 0xffffffffn);
  return r;
}

export function fromPair(hi: number, lo: number): bigint {
  return (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0);
}

const G_HI = 0x9e3779b9;
const G_LO = 0x7f4a7c15;
const M1_HI = 0xbf58476d;
const M1_LO = 0x1ce4e5b9;
const M2_HI = 0x94d049bb;
const M2_LO = 0x133111eb;

/** (ah:al) * (bh:bl) mod 2^64 into r. */
export function mulPair(ah: number, al: number, bh: number, bl: number, r: Pair): void {
  const a0 = al & 0xffff;
  const a1 = al >>> 16;
  const b0 = bl & 0xffff;
  const b1 = bl >>> 16;
  const p00 = a0 * b0;
  const p01 = a0 * b1;
  const p10 = a1 * b0;
  const p11 = a1 * b1;
  // al * bl = p11 2^32 + (p01 + p10) 2^16 + p00, every term exact in binary64.
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  const carry = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);
  r.lo = Math.imul(al, bl) >>> 0;
  r.hi = (carry + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

/** (ah:al) + (bh:bl) mod 2^64 into r. */
export function addPair(ah: number, al: number, bh: number, bl: number, r: Pair): void {
  const lo = (al >>> 0) + (bl >>> 0);
  r.lo = lo >>> 0;
  r.hi = (ah + bh + (lo > 0xffffffff ? 1 : 0)) >>> 0;
}

/** mix64 (SplitMix64 step) of (hi:lo) into r. */
export function mix64Pair(hi: number, lo: number, r: Pair): void {
  addPair(hi, lo, G_HI, G_LO, r);
  let h = r.hi;
  let l = r.lo;
  // z ^= z >> 30
  l = (l ^ ((l >>> 30) | (h << 2))) >>> 0;
  h = (h ^ (h >>> 30)) >>> 0;
  mulPair(h, l, M1_HI, M1_LO, r);
  h = r.hi;
  l = r.lo;
  // z ^= z >> 27
  l = (l ^ ((l >>> 27) | (h << 5))) >>> 0;
  h = (h ^ (h >>> 27)) >>> 0;
  mulPair(h, l, M2_HI, M2_LO, r);
  h = r.hi;
  l = r.lo;
  // z ^= z >> 31
  r.lo = (l ^ ((l >>> 31) | (h << 1))) >>> 0;
  r.hi = (h ^ (h >>> 31)) >>> 0;
}

/** A little-endian uint64 at byte offset `o` of `b`, as a bigint. */
export function readU64(b: Uint8Array, o: number): bigint {
  const lo = (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
  const hi = (b[o + 4]! | (b[o + 5]! << 8) | (b[o + 6]! << 16) | (b[o + 7]! << 24)) >>> 0;
  return fromPair(hi, lo);
}

/** 16 lowercase hex digits of a uint64 (the wire form of a PrivUnit nonce). */
export function hex16(x: bigint): string {
  return asU64(x).toString(16).padStart(16, "0");
}
