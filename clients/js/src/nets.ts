/**
 * A device's path through the round's node space (common/kinds/tree_nets.py), and its
 * nodes' keys.
 *
 * nettree (seed 004, Alg. 3): project with the public matrix and clip into
 * the ball; the level-T node is the nearest point of the lattice
 * shift_T + s_T Z^d'; the level-j node is the level-j point nearest the
 * level-(j+1) node's position (top-down); level 0 is the origin.
 *
 * lsh (seed 004, Sec. 5): the level-i node is the prefix of the first i
 * SimHash sign bits (bit j set iff <x, plane_j> >= 0).
 */

import { clipToBall } from "./bounds.js";
import type { TreeConfig } from "./config.js";
import { nodeKey } from "./hashing.js";
import { latticeSpacing, type TreePublic } from "./tree-public.js";

/** A node's integer coordinates: d' lattice indices (nettree) or one prefix code (lsh). */
export type Coords = (number | bigint)[];

function dot(a: Float64Array, ao: number, b: Float64Array, n: number): number {
  let s = 0;
  for (let j = 0; j < n; j++) s += a[ao + j]! * b[j]!;
  return s;
}

/** The projected point (nettree): P x clipped into the ball; x itself without a projection. */
export function project(c: TreeConfig, pub: TreePublic, ball: Float64Array): Float64Array {
  if (pub.projection === null) return ball;
  const y = new Float64Array(c.proj_dim);
  for (let i = 0; i < c.proj_dim; i++) y[i] = dot(pub.projection, i * c.dim, ball, c.dim);
  return clipToBall(y);
}

function latticeIndex(pub: TreePublic, dim: number, level: number, pos: ArrayLike<number>): Coords {
  const s = latticeSpacing(level);
  const out: number[] = new Array<number>(dim);
  for (let j = 0; j < dim; j++) out[j] = Math.floor((pos[j]! - pub.shifts[level * dim + j]!) / s + 0.5);
  return out;
}

/** The point's node at every level 0..T. */
export function path(c: TreeConfig, pub: TreePublic, ball: Float64Array): Coords[] {
  const t = c.levels;
  if (c.encoder === "lsh") {
    const out: Coords[] = [[0n]];
    let code = 0n; // up to 62 bits: a bigint
    for (let j = 0; j < t; j++) {
      if (dot(pub.planes, j * c.dim, ball, c.dim) >= 0) code |= 1n << BigInt(j);
      out.push([code]);
    }
    return out;
  }
  const d = c.proj_dim;
  const zero = new Array<number>(d).fill(0);
  const out: Coords[] = new Array<Coords>(t + 1).fill(zero);
  if (t === 0) return out;
  const y = project(c, pub, ball);
  out[t] = latticeIndex(pub, d, t, y);
  for (let j = t - 1; j >= 1; j--) {
    const s = latticeSpacing(j + 1);
    const child = out[j + 1]!;
    const pos = child.map((k, i) => pub.shifts[(j + 1) * d + i]! + s * Number(k));
    out[j] = latticeIndex(pub, d, j, pos);
  }
  return out;
}

/** The 64-bit key of a node at a level. */
export function keyAt(pub: TreePublic, level: number, coords: Coords): bigint {
  return nodeKey(pub.levelKeys[level]!, coords);
}
