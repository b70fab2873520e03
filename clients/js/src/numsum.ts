/**
 * Sums in numpy's order. The spec leaves the order of summation inside a norm
 * free (any order keeps every privacy property), but where a norm's result is
 * itself sent (a central round's clipped records) the same order gives the
 * same bytes as the reference. numpy's `add.reduce` over a contiguous axis
 * (what `np.linalg.norm(x, axis=...)` does) is its pairwise summation:
 * below 8 terms a plain loop; up to 128, eight running sums combined as
 * ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the tail; above,
 * the two halves (split at a multiple of 8) summed recursively.
 */

function pairwise(a: ArrayLike<number>, lo: number, n: number): number {
  if (n < 8) {
    let res = 0;
    for (let i = 0; i < n; i++) res += a[lo + i]!;
    return res;
  }
  if (n <= 128) {
    let r0 = a[lo]!, r1 = a[lo + 1]!, r2 = a[lo + 2]!, r3 = a[lo + 3]!;
    let r4 = a[lo + 4]!, r5 = a[lo + 5]!, r6 = a[lo + 6]!, r7 = a[lo + 7]!;
    let i = 8;
    for (; i < n - (n % 8); i += 8) {
      r0 += a[lo + i]!; r1 += a[lo + i + 1]!; r2 += a[lo + i + 2]!; r3 += a[lo + i + 3]!;
      r4 += a[lo + i + 4]!; r5 += a[lo + i + 5]!; r6 += a[lo + i + 6]!; r7 += a[lo + i + 7]!;
    }
    let res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
    for (; i < n; i++) res += a[lo + i]!;
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwise(a, lo, n2) + pairwise(a, lo + n2, n - n2);
}

/** numpy's add.reduce of a contiguous vector. */
export function npSum(a: ArrayLike<number>): number {
  return pairwise(a, 0, a.length);
}

const scratch: { buf: Float64Array } = { buf: new Float64Array(64) };

/** numpy's np.linalg.norm(v, axis=-1) of one row: sqrt(add.reduce(v * v)). */
export function npNorm(v: ArrayLike<number>, offset = 0, n = v.length - offset): number {
  if (scratch.buf.length < n) scratch.buf = new Float64Array(Math.max(n, 2 * scratch.buf.length));
  const sq = scratch.buf;
  for (let i = 0; i < n; i++) sq[i] = v[offset + i]! * v[offset + i]!;
  return Math.sqrt(pairwise(sq, 0, n));
}
