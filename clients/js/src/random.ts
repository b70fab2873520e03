/**
 * Device-private randomness: the coins, levels, rows, nonces and message ids
 * of one device. In use it is the OS's (`crypto.getRandomValues`, in every
 * browser and in Node >= 19); it never comes from the round's public seed.
 *
 * Every draw is made from uniform 64-bit words read from a byte source:
 *
 * - `below(B)`: the same rejection as the public stream's integers (keep a
 *   word w iff w < 2^64 - (2^64 mod B); answer w mod B): exactly uniform;
 * - `bernoulli(A)`: Bernoulli(A / 2^32) as `below(2^32) < A`: exact;
 * - `uniform()`: (w >> 11) 2^-53, used only where the Python device uses a
 *   53-bit uniform for a choice that is not a privacy coin (the root draw,
 *   PrivUnit's sphere rounding);
 * - `u64()`: one word (a PrivUnit nonce); `bytes(n)`: raw bytes (message ids).
 *
 * `BytesRandom` reads a given byte string instead (tests, and conformance
 * vectors once docs/protocol/vectors.md fixes how device randomness is
 * injected): the same draws in the same order give the same message.
 */

import { fromPair } from "./u64.js";

export interface DeviceRandom {
  /** n raw bytes. */
  bytes(n: number): Uint8Array;
}

const TWO_POW_64 = 1n << 64n;

/** One uniform 64-bit word (little-endian over 8 bytes). */
export function u64(r: DeviceRandom): bigint {
  const b = r.bytes(8);
  const lo = (b[0]! | (b[1]! << 8) | (b[2]! << 16) | (b[3]! << 24)) >>> 0;
  const hi = (b[4]! | (b[5]! << 8) | (b[6]! << 16) | (b[7]! << 24)) >>> 0;
  return fromPair(hi, lo);
}

/** A uniform integer in [0, bound), 1 <= bound <= 2^53, by rejection on words. */
export function below(r: DeviceRandom, bound: number): number {
  if (!(Number.isSafeInteger(bound) && bound >= 1)) throw new RangeError(`below needs a safe integer bound >= 1, got ${bound}`);
  const b = BigInt(bound);
  const limit = TWO_POW_64 - (TWO_POW_64 % b);
  for (;;) {
    const w = u64(r);
    if (w < limit) return Number(w % b);
  }
}

/** Bernoulli(numerator / 2^32), exactly. */
export function bernoulli(r: DeviceRandom, numerator: number): boolean {
  if (!(Number.isSafeInteger(numerator) && numerator >= 0 && numerator <= 2 ** 32)) {
    throw new RangeError(`a dyadic numerator must be in [0, 2^32], got ${numerator}`);
  }
  return below(r, 2 ** 32) < numerator;
}

/** A uniform double on the grid k 2^-53 in [0, 1). */
export function uniform(r: DeviceRandom): number {
  return Number(u64(r) >> 11n) * 2 ** -53;
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
