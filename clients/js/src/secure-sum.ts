/**
 * Secure-sum rounds (docs/protocol/secure-sum.md; common/mechanisms/secure_sum.py,
 * common/mechanisms/distributed_noise.py, common/mechanisms/exact_sampling.py): refine, partition,
 * elbow, and shuffle-model sketch. The device's vector is rounded to fixed
 * point, gets its share of the distributed noise (Polya differences or a
 * discrete Gaussian), and is split into s additive shares mod q = 2^bits, each
 * sealed on its own for the shuffler. **No local guarantee**: the ledger
 * records "none" with the round's central (eps, delta).
 *
 * Every sampler is vectorised exactly as the reference's, so that a device run
 * on a vector's bytes makes the same reads in the same order (integers via
 * `belowBig`: numpy's bounded Lemire per element).
 *
 * The published parameters are re-checked as SecureSumParams does: the
 * modulus, the shares for 2^-sigma security, and the delta spent (the laplace
 * clip's tail; for the gaussian law the zCDP conversion of Canonne, Kamath,
 * Steinke on the reference's grid of orders plus the truncation's tail).
 */

import { toBall } from "./bounds.js";
import { checkProtocol, int, parseBound, real, type Bound } from "./config.js";
import { ConfigError, ReportError } from "./errors.js";
import { type JsonValue, pyAsciiString } from "./json.js";
import { npNorm, npSum } from "./numsum.js";
import { gaussians, PROTOCOL_VERSION } from "./public-stream.js";
import { type DeviceRandom, belowBig, uniform } from "./random.js";
import { discreteGaussian, polya } from "./samplers.js";
import { seal } from "./seal.js";
import { toBase64, toHex, utf8 } from "./encoding.js";
import { laplaceScaleFraction, frequencies, parseSketchConfig, type SketchConfig } from "./sketch.js";

const MAX_BITS = 62;
const MIN_SIGMA = 40;

export interface SecureSumParams {
  length: number; l1_norm: number; max_abs: number; max_nonzero: number; epsilon: number; delta: number;
  min_devices: number; max_devices: number; scale: number; bits: number; shares: number; noise_clip: number;
  sigma: number; noise: "laplace" | "gaussian"; l2_norm: number; sigma_sq: number; aligned: boolean;
}

export function maxValue(p: SecureSumParams): number {
  return Math.ceil(p.scale * p.max_abs);
}

export function maxL1(p: SecureSumParams): number {
  return Math.floor(p.scale * p.l1_norm) + p.max_nonzero;
}

/** (t, s): the laplace law's Polya scale (alpha = exp(-s / t)). */
export function laplaceScale(p: SecureSumParams): [bigint, bigint] {
  return laplaceScaleFraction(2 * maxL1(p), p.epsilon);
}

export function parseSecureSum(v: unknown): SecureSumParams {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ConfigError("secure_sum must be an object");
  const d = v as Record<string, unknown>;
  const noise = d["noise"] ?? "laplace";
  if (noise !== "laplace" && noise !== "gaussian") throw new ConfigError(`secure sum noise must be laplace or gaussian, got ${String(noise)}`);
  const p: SecureSumParams = {
    length: int(d, "length", 1, 1 << 24), l1_norm: real(d, "l1_norm"), max_abs: real(d, "max_abs"),
    max_nonzero: int(d, "max_nonzero", 1, 1 << 24), epsilon: real(d, "epsilon"), delta: real(d, "delta"),
    min_devices: int(d, "min_devices", 16, Number.MAX_SAFE_INTEGER), max_devices: int(d, "max_devices", 16, Number.MAX_SAFE_INTEGER),
    scale: int(d, "scale", 1, 2 ** 40), bits: int(d, "bits", 2, MAX_BITS), shares: int(d, "shares", 2, 1024),
    noise_clip: int(d, "noise_clip", 0, 2 ** 50), sigma: int(d, "sigma", 0, 1024), noise,
    l2_norm: d["l2_norm"] === undefined ? 0 : real(d, "l2_norm"), sigma_sq: d["sigma_sq"] === undefined ? 0 : int(d, "sigma_sq", 0, 1 << 20),
    aligned: d["aligned"] === true,
  };
  if (!(p.l1_norm > 0 && p.max_abs > 0 && p.epsilon > 0)) throw new ConfigError("secure sum l1_norm, max_abs and epsilon must be > 0");
  if (p.max_nonzero > p.length) throw new ConfigError(`secure sum max_nonzero must be in [1, ${p.length}]`);
  if (!(p.delta > 0 && p.delta < 1)) throw new ConfigError("secure sum delta must be in (0, 1)");
  if (p.max_devices < p.min_devices) throw new ConfigError("max_devices < min_devices");
  if (p.noise === "gaussian") {
    if (!(p.l2_norm > 0) || !(p.sigma_sq >= 16 && p.sigma_sq <= 1 << 20)) throw new ConfigError("gaussian secure sum needs l2_norm > 0 and sigma_sq in [16, 2^20]");
  } else if (p.sigma_sq) throw new ConfigError("sigma_sq belongs to the gaussian noise");
  if (2 * p.max_devices * (maxValue(p) + p.noise_clip) + 2 >= 2 ** p.bits) throw new ConfigError(`q = 2^${p.bits} is too small`);
  const rule = Math.ceil((2 * p.sigma + p.bits) / Math.log2(p.min_devices / Math.E)) + 2;
  if (p.sigma < MIN_SIGMA || p.shares < rule) throw new ConfigError(`${p.shares} shares give less than 2^-${MIN_SIGMA} security`);
  const used = deltaUsed(p);
  if (used > p.delta * (1 + 1e-9)) throw new ConfigError(`clip ${p.noise_clip} and sigma ${p.sigma} spend delta ${used} > ${p.delta}`);
  return p;
}

/** delta of rho-zCDP at eps (Bun-Steinke Prop. 1.3). */
function zcdpDelta(rho: number, eps: number): number {
  if (rho <= 0) return 0;
  if (eps <= rho) return 1;
  return Math.exp(-((eps - rho) ** 2) / (4 * rho));
}

/** Canonne-Kamath-Steinke Cor. 13 on the reference's grid alpha = 1 + geomspace(1e-4, 1e6, 4000). */
export function zcdpDeltaTight(rho: number, eps: number): number {
  if (rho <= 0) return 0;
  const n = 4000;
  const lo = Math.log10(1e-4);
  const hi = Math.log10(1e6);
  let best = Infinity;
  for (let i = 0; i < n; i++) {
    const g = i === 0 ? 1e-4 : i === n - 1 ? 1e6 : 10 ** (lo + ((hi - lo) * i) / (n - 1));
    const alpha = 1 + g;
    const logD = (alpha - 1) * (alpha * rho - eps) - Math.log(alpha - 1) + alpha * Math.log1p(-1 / alpha);
    best = Math.min(best, logD);
  }
  return Math.min(zcdpDelta(rho, eps), Math.exp(Math.min(0, best)));
}

/** An upper bound on P(N_Z(0, S) > T) (exact_sampling.discrete_gaussian_tail). */
export function discreteGaussianTail(sigmaSq: number, clip: number): number {
  const m = clip + 1;
  const norm = Math.max(1, Math.sqrt(2 * Math.PI * sigmaSq) - 1);
  return Math.exp((-m * m) / (2 * sigmaSq)) / -Math.expm1(-m / sigmaSq) / norm;
}

/** The delta a parameter set spends (SecureSumParams.delta_used). */
export function deltaUsed(p: SecureSumParams): number {
  let tail: number;
  let mech: number;
  if (p.noise === "gaussian") {
    tail = discreteGaussianTail(p.sigma_sq, p.noise_clip);
    const spread = p.aligned ? Math.sqrt(2) : 2.0;
    const l2 = spread * p.scale * p.l2_norm + 2 * Math.sqrt(p.max_nonzero);
    const tau = 10.0 * (p.max_devices - 1) * Math.exp(-(Math.PI ** 2) * p.sigma_sq);
    const rho = (l2 ** 2 / (p.min_devices * p.sigma_sq) + 0.5 * tau * p.length) / 2;
    mech = zcdpDeltaTight(rho, p.epsilon);
  } else {
    const [t, s] = laplaceScale(p);
    tail = Math.exp(-Number(s) / Number(t)) ** (p.noise_clip + 1);
    mech = 0;
  }
  const tau = p.max_devices * p.length * 2 * tail;
  return mech + (1 + Math.exp(p.epsilon)) * (tau + 2 ** -p.sigma);
}

export interface SecureSumTrace {
  contribution?: Float64Array;
  fixedPoint?: bigint[];
  noise?: bigint[];
  split?: bigint[][];
}

/** Fixed point, noise and split of one device's vector: s shares of L + 1 values mod q. */
export function encodeShares(v: Float64Array, p: SecureSumParams, rnd: DeviceRandom, trace?: SecureSumTrace): bigint[][] {
  if (v.length !== p.length) throw new ConfigError(`secure sum vectors must have ${p.length} entries, got ${v.length}`);
  for (const x of v) if (!Number.isFinite(x)) throw new ConfigError("secure sum vectors contain NaN or infinite values");
  const A = BigInt(maxValue(p));
  const ints = Array.from(v, (x) => {
    const y = x * p.scale;
    const low = Math.floor(y);
    const n = BigInt(low) + (uniform(rnd) < y - low ? 1n : 0n);
    return n < -A ? -A : n > A ? A : n;
  });
  const l1 = ints.reduce((a, n) => a + (n < 0n ? -n : n), 0n);
  const nnz = Array.from(v).filter((x) => x !== 0).length;
  if (l1 > BigInt(maxL1(p)) || nnz > p.max_nonzero) throw new ReportError(`a vector exceeds the public bounds (L1 <= ${p.l1_norm}, <= ${p.max_nonzero} non-zeros)`);
  if (p.noise === "gaussian" && Math.sqrt(npSum(Array.from(v, (x) => x * x))) > p.l2_norm) throw new ReportError(`a vector exceeds the public bounds (L2 <= ${p.l2_norm})`);
  let noise: bigint[];
  if (p.noise === "gaussian") noise = discreteGaussian(p.sigma_sq, p.noise_clip, p.length, rnd);
  else {
    const [t, s] = laplaceScale(p);
    const a = polya(p.min_devices, s, t, p.noise_clip, p.length, rnd);
    const b = polya(p.min_devices, s, t, p.noise_clip, p.length, rnd);
    const T = BigInt(p.noise_clip);
    noise = a.map((x, i) => {
      const z = x - b[i]!;
      return z < -T ? -T : z > T ? T : z;
    });
  }
  const q = 1n << BigInt(p.bits);
  const w = [...ints.map((n, i) => n + noise[i]!), 1n].map((x) => ((x % q) + q) % q);
  const shares = Array.from({ length: p.shares }, () => Array.from({ length: p.length + 1 }, () => belowBig(rnd, q)));
  const last = shares[p.shares - 1]!;
  for (let i = 0; i <= p.length; i++) {
    let sum = 0n;
    for (let j = 0; j < p.shares - 1; j++) sum += shares[j]![i]!;
    last[i] = (((w[i]! - sum) % q) + q) % q;
  }
  if (trace) Object.assign(trace, { fixedPoint: ints, noise, split: shares });
  return shares;
}

/** The shuffler submission: each share a message (device_json) sealed on its own; ids drawn per share. */
export function sharesSubmission(shares: bigint[][], roundId: string, serverKey: Uint8Array, digest: string, rnd: DeviceRandom): string {
  const parts = shares.map((share) => {
    const bytes = new Uint8Array(8 * share.length);
    const view = new DataView(bytes.buffer);
    share.forEach((x, i) => view.setBigUint64(8 * i, x, true));
    const id = toHex(rnd.bytes(16));
    const json = `{"round_id":${pyAsciiString(roundId)},"message_id":"${id}","protocol":${PROTOCOL_VERSION},"share":"${toBase64(bytes)}"}`;
    return toBase64(seal(utf8(json), serverKey, roundId, rnd));
  });
  return `{"parts": [${parts.map((x) => `"${x}"`).join(", ")}], "config_digest": "${digest}"}`;
}

// ---- what each kind adds

export interface SharesConfig {
  kind: "refine" | "partition" | "elbow" | "sketch";
  protocol: number;
  round_id: string;
  k: number;
  dim: number;
  bound: Bound;
  secure_sum: SecureSumParams;
  centers: number[][];
  /** partition */
  bits: number;
  seed: bigint;
  /** partition: the point the hyperplanes pass through (the ball's centre when the config has none) */
  center: number[];
  /** elbow: 2 (kmeans) or 1 (kmedian) */
  z: number;
  sketch: SketchConfig | null;
}

/** A point of the unit ball from a config's JSON: `dim` finite numbers (JSON integers may arrive as bigint), norm <= 1. */
function ballPoint(raw: unknown, dim: number, shape: string, ball: string): number[] {
  if (!Array.isArray(raw) || raw.length !== dim) throw new ConfigError(shape);
  const row = raw.map((x: unknown) => (typeof x === "bigint" ? Number(x) : x));
  if (!row.every((x): x is number => typeof x === "number" && Number.isFinite(x)) || npNorm(row) > 1 + 1e-9) throw new ConfigError(ball);
  return row;
}

function centersOf(d: Record<string, unknown>, k: number, dim: number): number[][] {
  const raw = d["centers"];
  if (!Array.isArray(raw) || raw.length !== k) throw new ConfigError(`expected ${k} centers`);
  return raw.map((c: unknown, i: number) =>
    ballPoint(c, dim, `center ${i} must have ${dim} coordinates`, "centers must be finite points of the unit ball"));
}

export function parseSharesConfig(data: JsonValue | Record<string, unknown>): SharesConfig {
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new ConfigError("a config is a JSON object");
  const d = data as Record<string, unknown>;
  const protocol = checkProtocol(d);
  const kind = d["kind"];
  if (kind === "sketch") {
    const sk = parseSketchConfig(d);
    if (sk.model !== "shuffle") throw new ConfigError("a local sketch round has no secure sum");
    const p = parseSecureSum(d["secure_sum"]);
    const m = sk.sketch.size;
    if (p.length !== 2 * m || sk.sketch.measurements !== m || p.epsilon !== sk.sketch.epsilon) throw new ConfigError("the sketch's secure sum does not match its sketch");
    return { kind, protocol, round_id: sk.round_id, k: sk.k, dim: sk.dim, bound: sk.bound, secure_sum: p, centers: [], bits: 0, seed: 0n, center: [], z: 0, sketch: sk };
  }
  if (kind !== "refine" && kind !== "partition" && kind !== "elbow") throw new ConfigError(`not a secure-sum round: ${String(kind)}`);
  const allowed = { refine: ["centers", "keep", "parent_id"], partition: ["bits", "seed", "center"], elbow: ["centers", "objective", "parent_id"] }[kind];
  for (const key of Object.keys(d)) {
    if (![...allowed, "kind", "protocol", "round_id", "k", "dim", "bound", "secure_sum"].includes(key)) throw new ConfigError(`not a ${kind} config: unknown field ${key}`);
  }
  const k = int(d, "k", 1, 100_000);
  const dim = int(d, "dim", 1, 100_000);
  const roundId = d["round_id"];
  if (typeof roundId !== "string" || roundId.length < 1 || roundId.length > 64) throw new ConfigError("round_id must be a string of 1 to 64 characters");
  const p = parseSecureSum(d["secure_sum"]);
  const out: SharesConfig = { kind, protocol, round_id: roundId, k, dim, bound: parseBound(d["bound"], dim), secure_sum: p, centers: [],
    bits: 0, seed: 0n, center: [], z: 0, sketch: null };
  if (kind === "partition") {
    out.bits = int(d, "bits", 1, 30);
    const seed = d["seed"];
    if (typeof seed !== "bigint" || seed < 0n || seed >= 1n << 63n) throw new ConfigError("partition seed must be an integer in [0, 2^63)");
    out.seed = seed;
    if (p.length !== 2 ** out.bits * (dim + 1)) throw new ConfigError("the partition's secure sum length is not 2^bits (d + 1)");
    if ("center" in d) {
      out.center = ballPoint(d["center"], dim, `partition center must have ${dim} coordinates`,
        "partition center must be a finite point of the unit ball");
    }
  } else {
    out.centers = centersOf(d, k, dim);
    if (kind === "refine" && p.length !== k * (dim + 1)) throw new ConfigError("the refine round's secure sum length is not k (d + 1)");
    if (kind === "elbow") {
      const obj = d["objective"];
      if (obj !== "kmeans" && obj !== "kmedian") throw new ConfigError(`objective must be kmeans or kmedian, got ${String(obj)}`);
      out.z = obj === "kmeans" ? 2 : 1;
      if (p.length !== k) throw new ConfigError("the elbow round's secure sum length is not k");
    }
  }
  return out;
}

function sqDist(x: Float64Array, c: number[], xx: number): number {
  let dot = 0;
  for (let i = 0; i < x.length; i++) dot += x[i]! * c[i]!;
  return xx - 2 * dot + npSum(c.map((v) => v * v));
}

/** The vector this device adds (its kind's `contributions`), from its raw point. */
export function contribution(c: SharesConfig, point: ArrayLike<number>, omega?: Float64Array): Float64Array {
  if (point.length !== c.dim) throw new ReportError(`round ${c.round_id} takes points of dimension ${c.dim}; this one has ${point.length}`);
  const x = toBall(c.bound, point);
  const d = c.dim;
  const xx = npSum(Array.from(x, (v) => v * v));
  const slots = (bucket: number, buckets: number) => {
    const v = new Float64Array(buckets * (d + 1));
    for (let i = 0; i < d; i++) v[bucket * (d + 1) + i] = x[i]!;
    v[bucket * (d + 1) + d] = 1.0;
    return v;
  };
  if (c.kind === "refine") {
    let best = Infinity;
    let j = 0;
    c.centers.forEach((cj, i) => {
      const dist = sqDist(x, cj, xx);
      if (dist < best) { best = dist; j = i; }
    });
    return slots(j, c.k);
  }
  if (c.kind === "partition") {
    const h = gaussians(c.seed, "shoal/v1/partition/hyperplanes", c.bits * d);
    const at = c.center.length ? Float64Array.from(x, (v, i) => v - c.center[i]!) : x;
    let code = 0;
    for (let j = 0; j < c.bits; j++) {
      let dot = 0;
      for (let i = 0; i < d; i++) dot += at[i]! * h[j * d + i]!;
      if (dot > 0) code |= 1 << j;
    }
    return slots(code, 2 ** c.bits);
  }
  if (c.kind === "elbow") {
    const cap = 2.0 ** c.z;
    const costs: number[] = [];
    let run = Infinity;
    for (const cj of c.centers) {
      const d2 = Math.max(sqDist(x, cj, xx), 0.0);
      run = Math.min(run, c.z === 2 ? d2 : Math.sqrt(d2));
      costs.push(Math.min(Math.max(run, 0.0), cap));
    }
    return Float64Array.from(costs, (cost, i) => (i + 1 < costs.length ? cost - costs[i + 1]! : cost));
  }
  // shuffle-model sketch: the record's 2m features exp(i <x, Omega_j>) / sqrt(m), binary64
  const sk = c.sketch!.sketch;
  const om = omega ?? frequencies(sk);
  const m = sk.size;
  const out = new Float64Array(2 * m);
  const sq = Math.sqrt(m);
  for (let j = 0; j < m; j++) {
    let ph = 0;
    for (let i = 0; i < d; i++) ph += x[i]! * om[i * m + j]!;
    out[j] = Math.cos(ph) / sq;
    out[m + j] = Math.sin(ph) / sq;
  }
  return out;
}

