/**
 * The public objects of a tree round, from its seed by the stream's labels
 * (common/kinds/tree_randomness.py; docs/protocol/public-randomness.md, "The objects
 * and their labels"). Derived once per config and cached by the caller.
 */

import { identityProjection, type TreeConfig } from "./config.js";
import { gaussians, key64, uniforms, words } from "./public-stream.js";

export const LABELS = {
  projection: "shoal/v1/tree/projection", // Gaussians (proj_dim, dim), times a
  shifts: "shoal/v1/tree/lattice-shifts", // uniforms (levels + 1, proj_dim), row i times 2^(2-i)
  planes: "shoal/v1/tree/simhash-planes", // Gaussians (levels, dim)
  levelKeys: "shoal/v1/tree/node-keys", // words (levels + 1)
  histSeeds: "shoal/v1/tree/olh-seeds", // words (hist_pool)
  vecKey: "shoal/v1/tree/privunit-key", // one word
} as const;

export interface TreePublic {
  /** (proj_dim x dim) row-major, or null (lsh, identity nettree). */
  projection: Float64Array | null;
  /** (levels + 1) x proj_dim row-major: level i's lattice shift. */
  shifts: Float64Array;
  /** levels x dim row-major SimHash planes (lsh only; empty otherwise). */
  planes: Float64Array;
  levelKeys: bigint[];
  histSeeds: bigint[];
  vecKey: bigint;
}

/** a = (1 / sqrt(d')) / (1 + sqrt(2 / d')), in this order of binary64 operations. */
export function projectionScale(projDim: number): number {
  return 1.0 / Math.sqrt(projDim) / (1.0 + Math.sqrt(2.0 / projDim));
}

/** Spacing 2^(2-i) of the level-i lattice (exact). */
export function latticeSpacing(level: number): number {
  return 2 ** (2 - level);
}

export function treePublic(c: TreeConfig): TreePublic {
  let projection: Float64Array | null = null;
  if (c.encoder === "nettree" && !identityProjection(c)) {
    projection = gaussians(c.seed, LABELS.projection, c.proj_dim * c.dim);
    const a = projectionScale(c.proj_dim);
    for (let i = 0; i < projection.length; i++) projection[i] = projection[i]! * a;
  }
  const t = c.levels;
  let shifts: Float64Array = new Float64Array((t + 1) * c.proj_dim);
  if (c.encoder === "nettree") {
    shifts = uniforms(c.seed, LABELS.shifts, (t + 1) * c.proj_dim);
    for (let i = 0; i <= t; i++) {
      const s = latticeSpacing(i);
      for (let j = 0; j < c.proj_dim; j++) shifts[i * c.proj_dim + j] = shifts[i * c.proj_dim + j]! * s;
    }
  }
  const planes = c.encoder === "lsh" && t > 0 ? gaussians(c.seed, LABELS.planes, t * c.dim) : new Float64Array(0);
  return {
    projection,
    shifts,
    planes,
    levelKeys: words(c.seed, LABELS.levelKeys, t + 1),
    histSeeds: words(c.seed, LABELS.histSeeds, c.hist_pool),
    vecKey: key64(c.seed, LABELS.vecKey),
  };
}
