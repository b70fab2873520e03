/**
 * The public bound: how a raw point enters the unit ball (common/bounds.py).
 * Clip, never rescale by data: an L2 radius R (clip to the R-ball, then
 * divide by R) or a per-feature box (clip each feature, subtract the box's
 * middle, divide by its half-diagonal), then clip to the unit ball.
 *
 * Norms are computed overflow-free as the reference does (divide by the
 * largest |entry| first), so a huge finite input lands on the sphere in its
 * own direction; the order of summation inside a norm is free in the spec.
 */

import type { Bound } from "./config.js";
import { ReportError } from "./errors.js";
import { npNorm } from "./numsum.js";

function norm(v: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
  return Math.sqrt(s);
}

/** Project one point onto the L2 ball of the radius (a point inside is unchanged). */
export function clipToBall(y: Float64Array, radius = 1.0): Float64Array {
  let big = 0;
  for (let i = 0; i < y.length; i++) big = Math.max(big, Math.abs(y[i]!));
  const unit = new Float64Array(y.length);
  const div = big > 0 ? big : 1.0;
  for (let i = 0; i < y.length; i++) unit[i] = y[i]! / div;
  const unitNorm = npNorm(unit); // np.linalg.norm(unit, axis=1): numpy's pairwise order
  if (!(unitNorm * big > radius)) return Float64Array.from(y);
  const n = unitNorm > 0 ? unitNorm : 1.0;
  for (let i = 0; i < unit.length; i++) unit[i] = (unit[i]! / n) * radius;
  return unit;
}

/** The box's scale: the norm of its half-widths (one unit of the ball in the original space). */
export function boundScale(b: Bound): number {
  if (b.radius !== null) return b.radius;
  const half = b.low!.map((lo, i) => (b.high![i]! - lo) / 2);
  return norm(half);
}

/** A raw point in the unit ball, as the round's public bound maps it. */
export function toBall(b: Bound, x: ArrayLike<number>): Float64Array {
  for (let i = 0; i < x.length; i++) {
    if (!Number.isFinite(x[i]!)) throw new ReportError("the point has non-finite coordinates");
  }
  if (b.low !== null && b.high !== null) {
    if (x.length !== b.low.length) throw new ReportError(`the box has ${b.low.length} features, the point ${x.length}`);
    const scale = boundScale(b);
    const y = new Float64Array(x.length);
    for (let i = 0; i < x.length; i++) {
      const lo = b.low[i]!;
      const hi = b.high[i]!;
      const clipped = Math.min(Math.max(x[i]!, lo), hi);
      y[i] = (clipped - (lo + hi) / 2) / scale;
    }
    return clipToBall(y);
  }
  const r = b.radius!;
  const first = clipToBall(Float64Array.from(x), r);
  for (let i = 0; i < first.length; i++) first[i] = first[i]! / r;
  return clipToBall(first);
}

/** Does the bound move this raw point (outside the box, or beyond the radius)? The device's own knowledge. */
export function outside(b: Bound, x: ArrayLike<number>): boolean {
  if (b.low !== null && b.high !== null) {
    for (let i = 0; i < x.length; i++) if (x[i]! < b.low[i]! || x[i]! > b.high[i]!) return true;
    return false;
  }
  let big = 0;
  for (let i = 0; i < x.length; i++) big = Math.max(big, Math.abs(x[i]!));
  const div = big > 0 ? big : 1.0;
  let s = 0;
  for (let i = 0; i < x.length; i++) s += (x[i]! / div) ** 2;
  return Math.sqrt(s) * big > b.radius!;
}
