/**
 * A tree round's config as a device gets it (`GET /rounds/{id}/config`,
 * the `config` member; common/kinds/tree.py `config_from_dict`), checked as
 * the Python device checks it: the protocol version first
 * (common/kinds/__init__.py `check_protocol`), then every field a device uses.
 *
 * A shuffle round's claim is re-verified as the Python device does
 * (`_check_shuffle`): the local epsilon shuffled in batches of min_batch must
 * give (central_epsilon, delta) under the named FMT21 bound (`amplification.ts`).
 */

import { ConfigError } from "./errors.js";
import type { JsonObject, JsonValue } from "./json.js";
import { PROTOCOLS } from "./public-stream.js";
import { shuffleClaimHolds } from "./amplification.js";

export interface Bound {
  radius: number | null;
  low: number[] | null;
  high: number[] | null;
}

export interface TreeConfig {
  kind: "tree";
  protocol: number;
  round_id: string;
  k: number;
  dim: number;
  epsilon: number;
  bound: Bound;
  encoder: "lsh" | "nettree";
  levels: number;
  proj_dim: number;
  eps_hist: number;
  eps_vec: number;
  root_share: number;
  /** The share of tree devices that send only the histogram report (the rest only the vector report); 0: both. */
  hist_only_share: number;
  hist_buckets: number;
  hist_pool: number;
  vec_columns_log2: number;
  /** The public seed, in [0, 2^63): a bigint, since a double cannot hold it. */
  seed: bigint;
  n_expected: number;
  model: "local" | "shuffle";
  delta: number;
  vec_candidates: number;
  vec_cap: number;
  root_candidates: number;
  root_cap: number;
  central_epsilon: number;
  min_batch: number;
  amplification_bound: string;
  /** BUILDTREE parameters: the server's, carried through unread. */
  tree: JsonObject;
}

const FIELDS = new Set([
  "kind", "protocol", "round_id", "k", "dim", "epsilon", "bound", "encoder", "levels", "proj_dim", "eps_hist",
  "eps_vec", "root_share", "hist_buckets", "hist_pool", "vec_columns_log2", "seed", "n_expected", "model", "delta",
  "vec_candidates", "vec_cap", "root_candidates", "root_cap", "hist_only_share", "tree", "central_epsilon", "min_batch",
  "amplification_bound",
]);

/** The config's protocol version, if this device speaks it; else a ConfigError naming both. */
export function checkProtocol(data: JsonObject | Record<string, unknown>): number {
  const spoken = PROTOCOLS.join(" or ");
  if (!("protocol" in data)) {
    throw new ConfigError(
      "this round's config has no protocol version: it was published before protocol 1 (protocol 0, " +
        `numpy-derived public randomness); this device speaks protocol ${spoken} only: open a new round`,
    );
  }
  const v = data["protocol"];
  const n = typeof v === "bigint" ? Number(v) : typeof v === "number" && Number.isInteger(v) ? v : NaN;
  if (!PROTOCOLS.includes(n)) {
    throw new ConfigError(`this round speaks protocol ${String(v)}; this device speaks protocol ${spoken}`);
  }
  return n;
}

export function int(data: Record<string, unknown>, name: string, lo: number, hi: number): number {
  const v = data[name];
  let n: number;
  if (typeof v === "bigint") n = Number(v);
  else if (typeof v === "number" && Number.isSafeInteger(v)) n = v; // a plain JSON.parse object
  else throw new ConfigError(`${name} must be an integer, got ${String(v)}`);
  if (!(n >= lo && n <= hi)) throw new ConfigError(`${name} must be in [${lo}, ${hi}], got ${n}`);
  return n;
}

export function real(data: Record<string, unknown>, name: string): number {
  const v = data[name];
  const x = typeof v === "bigint" ? Number(v) : v;
  if (typeof x !== "number" || !Number.isFinite(x)) throw new ConfigError(`${name} must be a finite number, got ${String(v)}`);
  return x;
}

function reals(v: unknown, name: string): number[] {
  if (!Array.isArray(v)) throw new ConfigError(`bound ${name} must be a list of numbers`);
  return v.map((x: unknown, i: number) => {
    const y = typeof x === "bigint" ? Number(x) : x;
    if (typeof y !== "number" || !Number.isFinite(y)) throw new ConfigError(`bound ${name}[${i}] must be finite`);
    return y;
  });
}

export function parseBound(v: unknown, dim: number): Bound {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ConfigError("bound must be an object");
  const b = v as Record<string, unknown>;
  const radius = b["radius"] === null || b["radius"] === undefined ? null : real(b, "radius");
  const low = b["low"] === null || b["low"] === undefined ? null : reals(b["low"], "low");
  const high = b["high"] === null || b["high"] === undefined ? null : reals(b["high"], "high");
  if ((radius === null) === (low === null || high === null)) {
    throw new ConfigError("give either radius or both low and high");
  }
  if (radius !== null && !(radius > 0)) throw new ConfigError(`radius must be finite and > 0, got ${radius}`);
  if (low !== null && high !== null) {
    if (low.length !== high.length) throw new ConfigError(`box low has ${low.length} features, high has ${high.length}`);
    if (low.length !== dim) throw new ConfigError(`box has ${low.length} features, the round has dim ${dim}`);
    low.forEach((lo, i) => {
      if (!(high[i]! > lo)) throw new ConfigError(`box feature ${i}: need low < high, got ${lo}, ${high[i]}`);
    });
  }
  return { radius, low, high };
}

/**
 * Parse and check a tree round's published config. Pass the output of
 * `parseJson` (exact seeds); a `JSON.parse` object is accepted only while its
 * seed is a safe integer.
 */
export function parseTreeConfig(data: JsonValue | Record<string, unknown>): TreeConfig {
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new ConfigError("a config is a JSON object");
  const d = data as Record<string, unknown>;
  const protocol = checkProtocol(d);
  const kind = d["kind"] ?? "tree";
  if (kind !== "tree") throw new ConfigError(`this is a ${String(kind)} round's config, not a tree round's`);
  for (const k of Object.keys(d)) if (!FIELDS.has(k)) throw new ConfigError(`not a tree round config: unknown field ${k}`);
  const dim = int(d, "dim", 1, 1_000_000);
  const encoder = d["encoder"];
  if (encoder !== "lsh" && encoder !== "nettree") throw new ConfigError(`encoder must be lsh or nettree, got ${String(encoder)}`);
  const model = d["model"] ?? "local";
  if (model !== "local" && model !== "shuffle") throw new ConfigError(`model must be local or shuffle, got ${String(model)}`);
  const seedRaw = d["seed"];
  let seed: bigint;
  if (typeof seedRaw === "bigint") seed = seedRaw;
  else if (typeof seedRaw === "number" && Number.isSafeInteger(seedRaw)) seed = BigInt(seedRaw);
  else throw new ConfigError(`seed must be an exact integer (parse the config with parseJson), got ${String(seedRaw)}`);
  if (seed < 0n || seed >= 1n << 63n) throw new ConfigError(`seed must be in [0, 2^63), got ${seed}`);
  const roundId = d["round_id"] ?? "local";
  if (typeof roundId !== "string" || roundId.length < 1 || roundId.length > 64) {
    throw new ConfigError("round_id must be a string of 1 to 64 characters");
  }
  const tree = d["tree"] ?? {};
  if (typeof tree !== "object" || tree === null || Array.isArray(tree)) throw new ConfigError("tree must be an object");
  const opt = (name: string, fallback: number): number => (d[name] === undefined ? fallback : real(d, name));
  const optInt = (name: string, lo: number, hi: number): number => (d[name] === undefined ? 0 : int(d, name, lo, hi));
  const c: TreeConfig = {
    kind: "tree",
    protocol,
    round_id: roundId,
    k: int(d, "k", 1, Number.MAX_SAFE_INTEGER),
    dim,
    epsilon: real(d, "epsilon"),
    bound: parseBound(d["bound"], dim),
    encoder,
    levels: int(d, "levels", 0, 40),
    proj_dim: int(d, "proj_dim", 1, dim),
    eps_hist: real(d, "eps_hist"),
    eps_vec: real(d, "eps_vec"),
    root_share: real(d, "root_share"),
    hist_buckets: int(d, "hist_buckets", 2, 1 << 20),
    hist_pool: int(d, "hist_pool", 1, 1 << 16),
    vec_columns_log2: int(d, "vec_columns_log2", 4, 20),
    seed,
    n_expected: int(d, "n_expected", 1, Number.MAX_SAFE_INTEGER),
    model,
    delta: opt("delta", 0),
    vec_candidates: optInt("vec_candidates", 0, 1 << 16),
    vec_cap: optInt("vec_cap", 0, 1 << 16),
    root_candidates: optInt("root_candidates", 0, 1 << 16),
    root_cap: optInt("root_cap", 0, 1 << 16),
    hist_only_share: opt("hist_only_share", 0),
    central_epsilon: opt("central_epsilon", 0),
    min_batch: optInt("min_batch", 0, Number.MAX_SAFE_INTEGER),
    amplification_bound: typeof d["amplification_bound"] === "string" ? d["amplification_bound"] : "",
    tree: tree as JsonObject,
  };
  check(c);
  return c;
}

function check(c: TreeConfig): void {
  if (!(c.epsilon > 0)) throw new ConfigError(`epsilon must be > 0, got ${c.epsilon}`);
  if (c.encoder === "nettree" && c.proj_dim > 12) {
    throw new ConfigError(`nettree proj_dim ${c.proj_dim} > 12: each node would have 2^${c.proj_dim} children`);
  }
  if (c.encoder === "lsh" && c.proj_dim !== c.dim) throw new ConfigError("lsh has no projection: proj_dim must equal dim");
  if (c.encoder === "lsh" && c.levels > 62) throw new ConfigError(`lsh supports at most 62 levels, got ${c.levels}`);
  if (!(c.eps_hist >= 0 && c.eps_vec >= 0)) throw new ConfigError("eps_hist and eps_vec must be >= 0");
  const h = c.hist_only_share;
  if (!(h >= 0 && h < 1)) throw new ConfigError(`hist_only_share must be a number in [0, 1), got ${h}`);
  if (h > 0) {
    // One report per tree device, each at most the device's epsilon (compared exactly, as the Python device does).
    if (c.levels === 0 || !(c.eps_hist > 0) || !(c.eps_vec > 0)) {
      throw new ConfigError(`hist_only_share=${h} needs levels > 0, eps_hist > 0 and eps_vec > 0`);
    }
    if (Math.max(c.eps_hist, c.eps_vec) > c.epsilon) {
      throw new ConfigError(`with hist_only_share=${h} eps_hist ${c.eps_hist} and eps_vec ${c.eps_vec} must each be <= epsilon ${c.epsilon}`);
    }
  } else if (c.eps_hist + c.eps_vec > c.epsilon * (1 + 1e-9)) {
    throw new ConfigError(`eps_hist + eps_vec = ${c.eps_hist + c.eps_vec} exceeds epsilon ${c.epsilon}`);
  }
  if (c.levels > 0 && c.eps_hist <= 0) throw new ConfigError(`levels=${c.levels} needs eps_hist > 0`);
  if (c.eps_vec > 0 && c.dim < 2) throw new ConfigError("the vector report needs dim >= 2");
  if (c.levels === 0 && (c.eps_vec || c.eps_hist)) throw new ConfigError("levels=0 is a mean-only round: eps_hist and eps_vec must be 0");
  if (!(c.root_share >= 0 && c.root_share <= 1)) throw new ConfigError(`root_share must be in [0, 1], got ${c.root_share}`);
  if ((c.levels === 0) !== (c.root_share === 1)) throw new ConfigError("root_share=1 exactly when levels=0");
  if (c.root_share > 0 && c.dim < 2) throw new ConfigError("the root report needs dim >= 2");
  for (const [share, n, k, name] of [
    [c.eps_vec, c.vec_candidates, c.vec_cap, "vec"],
    [c.root_share, c.root_candidates, c.root_cap, "root"],
  ] as const) {
    if (share > 0) {
      // Published configs carry N and K (derive_config fills them); the device does not re-calibrate K.
      if (!(n >= 2 && k >= 1 && k < n)) throw new ConfigError(`${name}_candidates=${n}, ${name}_cap=${k}: need 1 <= K < N`);
    } else if (n || k) {
      throw new ConfigError(`${name}_candidates and ${name}_cap need a positive ${name === "vec" ? "eps_vec" : "root_share"}`);
    }
  }
  if (!(c.delta >= 0 && c.delta < 1)) throw new ConfigError(`delta must be in [0, 1), got ${c.delta}`);
  if (c.model === "shuffle") {
    if (!(c.central_epsilon > 0)) throw new ConfigError("a shuffle round needs central_epsilon > 0");
    if (!(c.delta > 0)) throw new ConfigError("a shuffle round needs delta in (0, 1)");
    if (c.min_batch < 2) throw new ConfigError("a shuffle round needs min_batch >= 2");
    if (c.epsilon < c.central_epsilon * (1 - 1e-9)) throw new ConfigError("local epsilon below the central one");
    if (!shuffleClaimHolds(c.epsilon, c.min_batch, c.central_epsilon, c.delta, c.amplification_bound)) {
      throw new ConfigError(`local epsilon ${c.epsilon} shuffled in batches of ${c.min_batch} does not give ` +
        `(${c.central_epsilon}, ${c.delta})-DP under ${c.amplification_bound}`);
    }
  } else if (c.delta || c.central_epsilon || c.min_batch || c.amplification_bound) {
    throw new ConfigError("delta, central_epsilon, min_batch and amplification_bound belong to shuffle rounds");
  }
}

/** nettree without projection: lattice points are positions in the ball. */
export function identityProjection(c: TreeConfig): boolean {
  return c.encoder === "nettree" && c.proj_dim === c.dim;
}
