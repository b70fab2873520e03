/**
 * Device-private randomness: the coins, levels, rows, nonces, message ids and
 * sealing keys of one device. In use it is the OS's (`crypto.getRandomValues`,
 * in every browser and in Node >= 19); it never comes from the round's public seed.
 *
 * Every draw is one of the reads of docs/protocol/vectors.md (common/randomness/device_random.py),
 * from a byte source in order:
 *
 * - `u32`: the next 4 bytes, little-endian; `u64`: the next 8 bytes;
 * - `double`: (u64 >> 11) 2^-53 (used only where the reference uses a 53-bit
 *   uniform for a choice that is not a privacy coin: the root draw, PrivUnit's
 *   sphere rounding);
 * - `below(B)`: numpy's bounded integers, Lemire's multiply-and-reject on a
 *   u32 when B <= 2^32 (on a u64 otherwise); B = 1 reads nothing, B = 2^32
 *   (2^64) is the raw u32 (u64): exactly uniform;
 * - `bernoulli(A)`: Bernoulli(A / 2^32) as `below(2^32) < A`: exact;
 * - `bytes(n)`: raw bytes (message ids, ephemeral keys, AEAD nonces).
 *
 * `BytesRandom` reads a given byte string instead (the conformance vectors'
 * `device_random`, and tests): the same reads in the same order give the
 * same message bytes.
 */

import { fromPair } from "./u64.js";

export interface DeviceRandom {
  /** n raw bytes. */
  bytes(n: number): Uint8Array;
}

export function u32(r: DeviceRandom): number {
  const b = r.bytes(4);
  return (b[0]! | (b[1]! << 8) | (b[2]! << 16) | (b[3]! << 24)) >>> 0;
}

/** One uniform 64-bit word (little-endian over 8 bytes). */
export function u64(r: DeviceRandom): bigint {
  const b = r.bytes(8);
  const lo = (b[0]! | (b[1]! << 8) | (b[2]! << 16) | (b[3]! << 24)) >>> 0;
  const hi = (b[4]! | (b[5]! << 8) | (b[6]! << 16) | (b[7]! << 24)) >>> 0;
  return fromPair(hi, lo);
}

/** A uniform double on the grid k 2^-53 in [0, 1). */
export function uniform(r: DeviceRandom): number {
  return Number(u64(r) >> 11n) * 2 ** -53;
}

const M32 = 0xffffffffn;
const M64 = (1n << 64n) - 1n;

/** A uniform integer in [0, bound), 1 <= bound <= 2^64 (numpy's Lemire rejection, as the vectors read it). */
export function belowBig(r: DeviceRandom, bound: bigint): bigint {
  if (bound < 1n || bound > 1n << 64n) throw new RangeError(`below needs 1 <= bound <= 2^64, got ${bound}`);
  const rng = bound - 1n;
  if (rng === 0n) return 0n;
  const bits = rng <= M32 ? 32n : 64n;
  const mask = bits === 32n ? M32 : M64;
  const draw = (): bigint => (bits === 32n ? BigInt(u32(r)) : u64(r));
  if (rng === mask) return draw();
  let m = draw() * bound;
  let low = m & mask;
  if (low < bound) {
    const threshold = ((mask + 1n) - bound) % bound;
    while (low < threshold) {
      m = draw() * bound;
      low = m & mask;
    }
  }
  return m >> bits;
}

/** A uniform integer in [0, bound), 1 <= bound <= 2^53. */
export function below(r: DeviceRandom, bound: number): number {
  if (!(Number.isSafeInteger(bound) && bound >= 1)) throw new RangeError(`below needs a safe integer bound >= 1, got ${bound}`);
  return Number(belowBig(r, BigInt(bound)));
}

/** Bernoulli(numerator / 2^32), exactly: one raw u32 compared with the numerator. */
export function bernoulli(r: DeviceRandom, numerator: number): boolean {
  if (!(Number.isSafeInteger(numerator) && numerator >= 0 && numerator <= 2 ** 32)) {
    throw new RangeError(`a dyadic numerator must be in [0, 2^32], got ${numerator}`);
  }
  return below(r, 2 ** 32) < numerator;
}

/** The OS's randomness, read in blocks (getRandomValues takes at most 65536 bytes a call). */
export class OsRandom implements DeviceRandom {
  private buf = new Uint8Array(4096);
  private pos = 4096;

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    let o = 0;
    while (o < n) {
      if (this.pos === this.buf.length) {
        globalThis.crypto.getRandomValues(this.buf);
        this.pos = 0;
      }
      const take = Math.min(n - o, this.buf.length - this.pos);
      out.set(this.buf.subarray(this.pos, this.pos + take), o);
      this.pos += take;
      o += take;
    }
    // Bytes handed out are never kept: wipe the copy in the buffer.
    this.buf.fill(0, this.pos - Math.min(this.pos, n), this.pos);
    return out;
  }
}

/** A fixed byte string as the device's randomness (tests and vectors only); throws when exhausted. */
export class BytesRandom implements DeviceRandom {
  private pos = 0;
  constructor(private readonly data: Uint8Array) {}

  bytes(n: number): Uint8Array {
    if (this.pos + n > this.data.length) {
      throw new RangeError(`the injected device randomness ran out after ${this.pos} bytes (${n} more wanted)`);
    }
    const out = this.data.slice(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** Bytes read so far. */
  get used(): number {
    return this.pos;
  }
}
