/**
 * Local refine rounds (common/kinds/local_refine.py; docs/protocol/local-refine.md):
 * one Lloyd step on fresh devices. The device assigns its ball point x to the
 * nearest parent center j (smallest |x|^2 - 2 <x, c_j> + |c_j|^2, ties to the
 * lowest index), builds the block vector of k (d + 1) entries, zero except
 * block j = (sqrt(1 - b^2) x, sqrt(b^2)), and sends one codebook PrivUnit
 * report of it with the published parameters (A included) and the key
 * word 0 of (seed, "shoal/v1/local-refine/privunit-key").
 *
 * Ledger: local eps = privunit.epsilon with family = parent_id (fresh devices only).
 */

import { checkProtocol, int, parseBound, real, type Bound } from "./config.js";
import { toBall } from "./bounds.js";
import { ConfigError, ReportError } from "./errors.js";
import { logRatioUpper } from "./exact.js";
import type { JsonValue } from "./json.js";
import { type PrivUnitParams, type Selection, select } from "./privunit.js";
import { key64, PROTOCOL_VERSION } from "./public-stream.js";
import type { DeviceRandom } from "./random.js";
import { hex16 } from "./u64.js";

export const CODEBOOK_LABEL = "shoal/v1/local-refine/privunit-key";
const MAX_BLOCK_DIM = 1 << 15;
const FIELDS = new Set(["kind", "protocol", "round_id", "parent_id", "k", "dim", "bound", "centers", "privunit", "seed",
  "count_weight", "keep"]);

export interface LocalRefineConfig {
  kind: "local_refine";
  protocol: number;
  round_id: string;
  parent_id: string;
  k: number;
  dim: number;
  bound: Bound;
  centers: number[][];
  privunit: PrivUnitParams;
  seed: bigint;
  count_weight: number;
  keep: number;
}

/** A published PrivUnit parameter set, checked by its exact ratio (privunit.PrivUnitParams.__post_init__). */
export function parsePrivUnit(v: unknown): PrivUnitParams {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ConfigError("privunit must be an object");
  const p = v as Record<string, unknown>;
  const dim = int(p, "dim", 2, MAX_BLOCK_DIM);
  const epsilon = real(p, "epsilon");
  const candidates = int(p, "candidates", 2, 1 << 16);
  const cap = int(p, "cap", 1, candidates - 1);
  const a = int(p, "cap_numerator", 1, 2 ** 32 - 1);
  if (!(epsilon > 0)) throw new ConfigError(`PrivUnit epsilon must be > 0, got ${epsilon}`);
  const num = a * (candidates - cap);
  const den = cap * (2 ** 32 - a);
  if (num < den) throw new ConfigError(`PrivUnit cap (K=${cap}, A=${a}) is less likely per index than its complement`);
  if (logRatioUpper(num, den) > epsilon) throw new ConfigError(`PrivUnit (N=${candidates}, K=${cap}, A=${a}) has a likelihood ratio above e^${epsilon}`);
  return { dim, epsilon, candidates, cap, capNumerator: a };
}

export function parseLocalRefineConfig(data: JsonValue | Record<string, unknown>): LocalRefineConfig {
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new ConfigError("a config is a JSON object");
  const d = data as Record<string, unknown>;
  const protocol = checkProtocol(d);
  if (d["kind"] !== "local_refine") throw new ConfigError(`this is a ${String(d["kind"])} round's config, not a local_refine round's`);
  for (const key of Object.keys(d)) if (!FIELDS.has(key)) throw new ConfigError(`not a local refine config: unknown field ${key}`);
  const k = int(d, "k", 1, MAX_BLOCK_DIM);
  const dim = int(d, "dim", 1, MAX_BLOCK_DIM);
  if (k * (dim + 1) > MAX_BLOCK_DIM) throw new ConfigError(`local refine reports have k (d + 1) = ${k * (dim + 1)} dimensions, over ${MAX_BLOCK_DIM}`);
  const keep = d["keep"] === undefined ? 0 : int(d, "keep", 0, k);
  const raw = d["centers"];
  if (!Array.isArray(raw) || raw.length !== k) throw new ConfigError(`local refine centers: expected ${k} of them`);
  const centers = raw.map((c: unknown, i: number) => {
    if (!Array.isArray(c) || c.length !== dim) throw new ConfigError(`local refine center ${i} must have ${dim} coordinates`);
    const row = c.map((v: unknown) => (typeof v === "bigint" ? Number(v) : v));
    if (!row.every((v) => typeof v === "number" && Number.isFinite(v))) throw new ConfigError(`local refine center ${i} must be finite`);
    if (Math.sqrt(row.reduce((s: number, v) => s + (v as number) ** 2, 0)) > 1 + 1e-9) throw new ConfigError("local refine centers must be points of the unit ball");
    return row as number[];
  });
  const privunit = parsePrivUnit(d["privunit"]);
  if (privunit.dim !== k * (dim + 1)) throw new ConfigError(`local refine PrivUnit has dim ${privunit.dim}, expected k (d + 1) = ${k * (dim + 1)}`);
  const seed = d["seed"];
  if (typeof seed !== "bigint" || seed < 0n || seed >= 1n << 63n) throw new ConfigError(`local refine seed must be an integer in [0, 2^63), got ${String(seed)}`);
  const cw = d["count_weight"];
  if (typeof cw !== "number" || !(cw > 0 && cw < 1)) throw new ConfigError(`local refine count_weight must be a float in (0, 1), got ${String(cw)}`);
  const roundId = d["round_id"];
  const parent = d["parent_id"];
  if (typeof roundId !== "string" || typeof parent !== "string" || !roundId || !parent) throw new ConfigError("round_id and parent_id must be strings");
  return { kind: "local_refine", protocol, round_id: roundId, parent_id: parent, k, dim, bound: parseBound(d["bound"], dim),
    centers, privunit, seed, count_weight: cw, keep };
}

export interface LocalRefineRound {
  config: LocalRefineConfig;
  key: bigint;
}

export function prepareLocalRefine(config: LocalRefineConfig): LocalRefineRound {
  return { config, key: key64(config.seed, CODEBOOK_LABEL) };
}

/** The nearest center and the block vector of a ball point. */
export function blockVector(c: LocalRefineConfig, x: Float64Array): { center: number; u: Float64Array } {
  let xx = 0;
  for (let i = 0; i < c.dim; i++) xx += x[i]! * x[i]!;
  let best = Infinity;
  let center = 0;
  c.centers.forEach((cj, j) => {
    let dot = 0;
    let cc = 0;
    for (let i = 0; i < c.dim; i++) {
      dot += x[i]! * cj[i]!;
      cc += cj[i]! * cj[i]!;
    }
    const dist = xx - 2 * dot + cc;
    if (dist < best) {
      best = dist;
      center = j;
    }
  });
  const u = new Float64Array(c.k * (c.dim + 1));
  const a = Math.sqrt(1.0 - c.count_weight);
  const o = center * (c.dim + 1);
  for (let i = 0; i < c.dim; i++) u[o + i] = a * x[i]!;
  u[o + c.dim] = Math.sqrt(c.count_weight);
  return { center, u };
}

export interface CodebookMessage {
  round_id: string;
  message_id: string;
  protocol: number;
  nonce: string;
  index: number;
}

export function encodeLocalRefine(round: LocalRefineRound, point: ArrayLike<number>, rnd: DeviceRandom,
                                  trace?: { ball?: Float64Array; center?: number; u?: Float64Array; selection?: Selection }): CodebookMessage {
  const c = round.config;
  if (point.length !== c.dim) throw new ReportError(`round ${c.round_id} takes points of dimension ${c.dim}; this one has ${point.length}`);
  const x = toBall(c.bound, point);
  const { center, u } = blockVector(c, x);
  const s = select(u, c.privunit, round.key, rnd);
  const id = Array.from(rnd.bytes(16), (b) => b.toString(16).padStart(2, "0")).join("");
  if (trace) Object.assign(trace, { ball: x, center, u, selection: s });
  return { round_id: c.round_id, message_id: id, protocol: PROTOCOL_VERSION, nonce: hex16(s.nonce), index: s.index };
}

/** pydantic's model_dump_json of a CodebookMessage. */
export function codebookJson(m: CodebookMessage): string {
  return `{"round_id":${JSON.stringify(m.round_id)},"message_id":"${m.message_id}","protocol":${m.protocol},` +
    `"nonce":"${m.nonce}","index":${m.index}}`;
}
