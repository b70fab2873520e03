/**
 * Local-model sketch rounds (docs/protocol/sketch.md; common/mechanisms/sketch.py,
 * client/sketch_encoder.py): the device's eps-DP scrambled sketch of its n0
 * records, random Fourier features at the round's public frequencies, on a
 * public grid with exact discrete Laplace noise.
 *
 * With r < m each record touches a uniform r-subset of the m entries (Floyd's
 * algorithm, drawn for every record step by step as the reference vectorises
 * it). The shuffle model's features go through the secure sum (secure-sum.ts).
 *
 * Floating point, as the reference: phases <x, Omega_j> and their cos/sin in
 * binary32 (x and Omega rounded to binary32; the dot product accumulated in
 * binary32 here, in an order the spec leaves free), sums over records in
 * binary64. Only the grid rounding of each real can see those ulps; the
 * privacy argument (integer sensitivity on the grid) holds for any of them.
 */

import { toBall } from "./bounds.js";
import { checkProtocol, int, parseBound, real, type Bound } from "./config.js";
import { ConfigError, ReportError } from "./errors.js";
import { pyAsciiString, pyFloat, type JsonValue } from "./json.js";
import { npNorm } from "./numsum.js";
import { gaussians, PROTOCOL_VERSION, uniforms } from "./public-stream.js";
import { type DeviceRandom, belowBig } from "./random.js";
import { discreteLaplace } from "./samplers.js";
import { toBase64, toHex } from "./encoding.js";

export const FREQUENCY_LABELS = {
  directions: "shoal/v1/sketch/directions",
  radii: "shoal/v1/sketch/radii",
  bandwidths: "shoal/v1/sketch/bandwidths",
} as const;
const MAX_SKETCH = 1 << 16;
const SENSITIVITY_MARGIN = 1 + 1e-5;
const GRID_STEPS = 100;

export interface SketchParams {
  dim: number;
  size: number;
  measurements: number;
  epsilon: number;
  seed: bigint;
  scale_low: number;
  scale_high: number;
}

export interface SketchConfig {
  kind: "sketch";
  protocol: number;
  round_id: string;
  k: number;
  dim: number;
  bound: Bound;
  model: "local" | "shuffle";
  sketch: SketchParams;
  n_expected: number;
}

export function parseSketchConfig(data: JsonValue | Record<string, unknown>): SketchConfig {
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new ConfigError("a config is a JSON object");
  const d = data as Record<string, unknown>;
  const protocol = checkProtocol(d);
  if (d["kind"] !== "sketch") throw new ConfigError(`this is a ${String(d["kind"])} round's config, not a sketch round's`);
  const allowed = ["kind", "protocol", "round_id", "k", "dim", "bound", "model", "sketch", "n_expected", "secure_sum", "restarts"];
  for (const key of Object.keys(d)) if (!allowed.includes(key)) throw new ConfigError(`not a sketch config: unknown field ${key}`);
  const dim = int(d, "dim", 1, 100_000);
  const model = d["model"];
  if (model !== "local" && model !== "shuffle") throw new ConfigError(`model must be local or shuffle, got ${String(model)}`);
  if ((model === "local") !== (d["secure_sum"] === null || d["secure_sum"] === undefined)) {
    throw new ConfigError("secure_sum is null exactly in the local model");
  }
  const s = d["sketch"] as Record<string, unknown> | undefined;
  if (typeof s !== "object" || s === null) throw new ConfigError("sketch must be an object");
  const size = int(s, "size", 1, MAX_SKETCH);
  const seed = s["seed"];
  if (typeof seed !== "bigint" || seed < 0n || seed >= 1n << 63n) throw new ConfigError("sketch seed must be an integer in [0, 2^63)");
  const sketch: SketchParams = {
    dim: int(s, "dim", 1, 100_000), size, measurements: int(s, "measurements", 1, size), epsilon: real(s, "epsilon"), seed,
    scale_low: real(s, "scale_low"), scale_high: real(s, "scale_high"),
  };
  if (!(sketch.epsilon > 0)) throw new ConfigError(`sketch epsilon must be > 0, got ${sketch.epsilon}`);
  if (!(sketch.scale_low > 0 && sketch.scale_high >= sketch.scale_low)) throw new ConfigError("need 0 < scale_low <= scale_high");
  if (sketch.dim !== dim) throw new ConfigError(`sketch round dim ${dim} != sketch dim ${sketch.dim}`);
  const roundId = d["round_id"];
  if (typeof roundId !== "string" || roundId.length < 1 || roundId.length > 64) throw new ConfigError("round_id must be a string of 1 to 64 characters");
  return { kind: "sketch", protocol, round_id: roundId, k: int(d, "k", 1, 1_000_000), dim, bound: parseBound(d["bound"], dim),
    model, sketch, n_expected: int(d, "n_expected", 1, Number.MAX_SAFE_INTEGER) };
}

/** The inverse CDF table of p(R) ~ sqrt(R^2 + R^4/4) exp(-R^2/2) on 24001 points of [0, 12] (trapezoid rule). */
function radiusTable(): { grid: Float64Array; cdf: Float64Array } {
  const n = 24001;
  const step = 12 / (n - 1);
  const grid = new Float64Array(n);
  for (let i = 0; i < n; i++) grid[i] = i * step;
  grid[n - 1] = 12; // numpy's linspace ends exactly at stop
  const pdf = grid.map((g) => Math.sqrt(g * g + Math.pow(g, 4) / 4) * Math.exp(-(g * g) / 2));
  const cdf = new Float64Array(n);
  for (let i = 1; i < n; i++) cdf[i] = cdf[i - 1]! + (pdf[i]! + pdf[i - 1]!) / 2;
  const last = cdf[n - 1]!;
  for (let i = 0; i < n; i++) cdf[i] = cdf[i]! / last;
  return { grid, cdf };
}

/** numpy's interp(x, xp, fp) for increasing xp. */
function interp(x: number, xp: Float64Array, fp: Float64Array): number {
  const n = xp.length;
  if (x <= xp[0]!) return fp[0]!;
  if (x >= xp[n - 1]!) return fp[n - 1]!;
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xp[mid]! <= x) lo = mid;
    else hi = mid;
  }
  const slope = (fp[lo + 1]! - fp[lo]!) / (xp[lo + 1]! - xp[lo]!);
  return slope * (x - xp[lo]!) + fp[lo]!;
}

/** Omega (d x m) row-major: column j = unit(g_j) R(u_j) / exp(log lo + v_j (log hi - log lo)). */
export function frequencies(p: SketchParams): Float64Array {
  const { dim: d, size: m } = p;
  const g = gaussians(p.seed, FREQUENCY_LABELS.directions, m * d);
  const u = uniforms(p.seed, FREQUENCY_LABELS.radii, m);
  const v = uniforms(p.seed, FREQUENCY_LABELS.bandwidths, m);
  const { grid, cdf } = radiusTable();
  const lo = Math.log(p.scale_low);
  const hi = Math.log(p.scale_high);
  const omega = new Float64Array(d * m);
  for (let j = 0; j < m; j++) {
    const norm = Math.max(npNorm(g, j * d, d), 1e-300);
    const scale = interp(u[j]!, cdf, grid) / Math.exp(lo + v[j]! * (hi - lo));
    for (let i = 0; i < d; i++) omega[i * m + j] = (g[j * d + i]! / norm) * scale;
  }
  return omega;
}

export interface SketchNoise {
  exponent: number;
  sensitivity: number;
  scaleNum: bigint;
  scaleDen: bigint;
}

/** ceil(D 2^10 / eps) exactly (eps a binary64, hence a dyadic rational): laplace_scale_fraction. */
export function laplaceScaleFraction(sensitivity: number, epsilon: number): [bigint, bigint] {
  if (!(sensitivity >= 1 && Number.isSafeInteger(sensitivity) && Number.isFinite(epsilon) && epsilon > 0)) {
    throw new ConfigError(`laplace scale needs sensitivity >= 1 and eps > 0, got ${sensitivity}, ${epsilon}`);
  }
  const s = 1024n;
  // eps = mant 2^exp with an integer mant < 2^53
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, epsilon);
  const bits = view.getBigUint64(0);
  const e = Number((bits >> 52n) & 0x7ffn);
  const frac = bits & ((1n << 52n) - 1n);
  const mant = e === 0 ? frac : frac | (1n << 52n);
  const exp = (e === 0 ? 1 : e) - 1075;
  // t = ceil(D s / (mant 2^exp)) = ceil(D s 2^-exp / mant)
  let num = BigInt(sensitivity) * s;
  let den = mant;
  if (exp < 0) num <<= BigInt(-exp);
  else den <<= BigInt(exp);
  return [(num + den - 1n) / den, s];
}

export function noiseGrid(p: SketchParams, n0: number): SketchNoise {
  if (!(n0 >= 1)) throw new ConfigError(`n0 must be >= 1, got ${n0}`);
  const m = p.size;
  const r = p.measurements;
  const alpha = r / m;
  const sens = (2 * Math.sqrt(2) * Math.sqrt(m) * SENSITIVITY_MARGIN) / n0;
  const exponent = Math.floor(Math.log2(sens / (GRID_STEPS * 2 * r)));
  const step = 2 ** exponent;
  const slack = (4.0 * (n0 + 4) * 2 ** -53) / (alpha * Math.sqrt(m));
  const sensitivity = Math.ceil((sens + 2 * r * slack) / step) + 2 * r;
  const [t, s] = laplaceScaleFraction(sensitivity, p.epsilon);
  return { exponent, sensitivity, scaleNum: t, scaleDen: s };
}

/** n independent uniform r-subsets of [0, m), Floyd's algorithm vectorised over the rows as the reference. */
export function masks(n: number, m: number, r: number, rnd: DeviceRandom): number[][] {
  const taken = Array.from({ length: n }, () => new Uint8Array(m));
  const out = Array.from({ length: n }, () => new Array<number>(r));
  for (let step = 0, j = m - r; j < m; step++, j++) {
    const t = Array.from({ length: n }, () => Number(belowBig(rnd, BigInt(j + 1))));
    for (let row = 0; row < n; row++) {
      const pick = taken[row]![t[row]!] ? j : t[row]!;
      taken[row]![pick] = 1;
      out[row]![step] = pick;
    }
  }
  return out;
}

/** round half to even of a double (numpy's rint). */
function rint(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d < 0.5) return f;
  if (d > 0.5) return f + 1;
  return f % 2 === 0 ? f : f + 1;
}

export interface SketchReport {
  /** The 2m sent reals (real parts, then imaginary parts), k_i 2^e. */
  values: number[];
  /** Their grid integers k_i, and the grid exponent e. */
  units: bigint[];
  exponent: number;
  n0: number;
  message_id: string;
}

export interface SketchRound {
  config: SketchConfig;
  omega: Float64Array;
}

export function prepareSketch(config: SketchConfig): SketchRound {
  return { config, omega: frequencies(config.sketch) };
}

/** One device's local-model sketch of its records (1 or more points), in the reference's read order. */
export function encodeSketch(round: SketchRound, records: readonly ArrayLike<number>[], rnd: DeviceRandom,
                             trace?: { noiseless?: number[] }): SketchReport {
  const c = round.config;
  const p = c.sketch;
  if (c.model !== "local") throw new ConfigError(`round ${c.round_id} is a ${c.model}-model sketch round: not implemented in TypeScript`);
  const n0 = records.length;
  if (n0 < 1) throw new ReportError("a sketch needs at least one record");
  const m = p.size;
  const d = p.dim;
  const r = p.measurements;
  const om32 = Float32Array.from(round.omega);
  const re = new Float64Array(m);
  const im = new Float64Array(m);
  const balls = records.map((rec) => {
    if (rec.length !== d) throw new ReportError(`round ${c.round_id} takes points of dimension ${d}; this one has ${rec.length}`);
    const x = toBall(c.bound, rec);
    if (npNorm(x) > 1 + 1e-9) throw new ReportError("a record outside the unit ball after the bound (a bug)");
    return x;
  });
  // Floyd's uniform r-subsets (common/mechanisms/sketch.py masks): step j = m - r .. m - 1 draws t in [0, j]
  // for every record in turn, and takes t, or j if t is taken; all masks before any noise.
  const subsets: number[][] | null = r < m ? masks(n0, m, r, rnd) : null;
  balls.forEach((x, l) => {
    const x32 = Float32Array.from(x);
    for (const j of subsets ? subsets[l]! : Array.from({ length: m }, (_, i) => i)) {
      let ph = 0;
      for (let i = 0; i < d; i++) ph = Math.fround(ph + Math.fround(x32[i]! * om32[i * m + j]!));
      re[j] = re[j]! + Math.fround(Math.cos(ph));
      im[j] = im[j]! + Math.fround(Math.sin(ph));
    }
  });
  const alpha = p.measurements / m;
  const sq = Math.sqrt(m);
  const v = [...re, ...im].map((s) => s / sq / (alpha * n0));
  if (trace) trace.noiseless = v;
  const noise = noiseGrid(p, n0);
  const lap = discreteLaplace(noise.scaleNum, noise.scaleDen, 2 * m, rnd);
  const units = v.map((x, i) => BigInt(rint(x * 2 ** -noise.exponent)) + lap[i]!);
  const values = units.map((k) => Number(k) * 2 ** noise.exponent);
  const id = toHex(rnd.bytes(16));
  return { values, units, exponent: noise.exponent, n0, message_id: id };
}

/** The binary body (common/wire/binary.py encode_sketch): "SHS" | 1 | protocol | id | n0 u32 | exponent i16 | width u8 | units. */
export function sketchBinary(r: SketchReport): Uint8Array {
  const width = r.units.every((k) => (k < 0n ? -k : k) < 1n << 31n) ? 4 : 8;
  const out = new Uint8Array(5 + 16 + 4 + 2 + 1 + width * r.units.length);
  out.set([0x53, 0x48, 0x53, 1, PROTOCOL_VERSION]);
  for (let j = 0; j < 16; j++) out[5 + j] = parseInt(r.message_id.slice(2 * j, 2 * j + 2), 16);
  const view = new DataView(out.buffer);
  view.setUint32(21, r.n0, true);
  view.setInt16(25, r.exponent, true);
  view.setUint8(27, width);
  r.units.forEach((k, i) => {
    if (width === 4) view.setInt32(28 + 4 * i, Number(k), true);
    else view.setBigInt64(28 + 8 * i, k, true);
  });
  return out;
}

/** What the reference's ledger records for a binary sketch: json.dumps({"binary": base64}). */
export function recordedBinary(body: Uint8Array): string {
  return `{"binary": "${toBase64(body)}"}`;
}

/** A binary sketch body as the reference's JSON form (client/device.py wire_body, binary=False). */
export function sketchJson(roundId: string, body: Uint8Array): string {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const id = Array.from(body.subarray(5, 21), (b) => b.toString(16).padStart(2, "0")).join("");
  const n0 = view.getUint32(21, true);
  const exponent = view.getInt16(25, true);
  const width = view.getUint8(27);
  const values: string[] = [];
  for (let o = 28; o < body.length; o += width) {
    const k = width === 4 ? view.getInt32(o, true) : Number(view.getBigInt64(o, true));
    values.push(pyFloat(k * 2 ** exponent));
  }
  return `{"round_id":${pyAsciiString(roundId)},"message_id":"${id}","protocol":${body[4]},"sketch":[${values.join(",")}],"n0":${n0}}`;
}

