/**
 * Keyed 64-bit hashing of net-tree nodes and the OLH bucket hash
 * (common/randomness/hashing.py): SplitMix64's mix64 with the round's public keys.
 */

import { GAMMA, MASK64, mix64Big } from "./u64.js";

/**
 * The 64-bit key of one node: (level key, integer coordinates). A binary
 * LSH prefix is one coordinate; a lattice node has d' of them. Negative
 * coordinates enter as their two's complement mod 2^64 (numpy's int64 ->
 * uint64 cast).
 */
export function nodeKey(levelKey: bigint, coords: readonly (number | bigint)[]): bigint {
  let h = levelKey & MASK64;
  for (let j = 0; j < coords.length; j++) {
    const c = coords[j]!;
    if (typeof c === "number" && !Number.isSafeInteger(c)) throw new RangeError(`a node coordinate must be a safe integer, got ${c}`);
    const col = (BigInt.asUintN(64, BigInt(c)) + BigInt(j) * GAMMA) & MASK64;
    h = mix64Big(h ^ col);
  }
  return h;
}

/** The OLH bucket of a node key under one public seed: mix64(seed xor key) mod g. */
export function bucketHash(seed: bigint, key: bigint, buckets: number): number {
  return Number(mix64Big((seed ^ key) & MASK64) % BigInt(buckets));
}

/** H[r, c] = (-1)^popcount(r & c) of the Sylvester Hadamard matrix (r, c < 2^31). */
export function hadamardSign(row: number, column: number): 1 | -1 {
  let v = (row & column) >>> 0;
  v ^= v >>> 16;
  v ^= v >>> 8;
  v ^= v >>> 4;
  v ^= v >>> 2;
  v ^= v >>> 1;
  return (v & 1) === 1 ? -1 : 1;
}
