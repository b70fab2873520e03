/**
 * A device's tree-round report (client/encoder.py, one device).
 *
 * The device maps its point into the unit ball with the public bound. With
 * probability root_share it is a root device and sends only the root report:
 * PrivUnit at the full epsilon of its ball point times the root node's
 * Hadamard sign, at level 0. Every other device (a tree device) sends
 * - a histogram report: OLH of its node at a level drawn from 1..T, with an
 *   OLH seed drawn from the public pool: GRR over g buckets that keeps the
 *   true bucket with probability A / 2^32 (exact), else a uniform other one;
 * - a vector report: PrivUnit at eps_vec of its ball point times
 *   H[row, column(node)], the Hadamard sign of its node's column (the top
 *   vec_columns_log2 bits of the node's key) at a level drawn from 1..T and
 *   a uniform row.
 * With hist_only_share h > 0 a tree device sends only one of them: the
 * histogram report with probability h (a second uniform, right after the root
 * one), else the vector report.
 * Root choice, levels, seed index and row are drawn independently of the
 * point; only the randomisers' outputs depend on it.
 *
 * Device randomness is drawn in this order (the Python device's order for
 * one device): root uniform (when root_share < 1); a tree device's hist-only
 * uniform (when hist_only_share > 0); for a tree device with a
 * histogram report: level, seed index, keep coin, other-bucket offset; for a
 * vector report: level (tree device), row, then PrivUnit's draws
 * (`privunit.select`); last, the 16 bytes of the message id.
 */

import type { TreeConfig } from "./config.js";
import { ReportError } from "./errors.js";
import { grrKeepNumerator, privunitNumerator } from "./exact.js";
import { bucketHash, hadamardSign } from "./hashing.js";
import { type Coords, keyAt, path } from "./nets.js";
import { type PrivUnitParams, select } from "./privunit.js";
import { type DeviceRandom, below, bernoulli, uniform } from "./random.js";
import { toBall } from "./bounds.js";
import { type TreePublic, treePublic } from "./tree-public.js";
import { hex16 } from "./u64.js";
import { PROTOCOL_VERSION } from "./public-stream.js";

export interface HistReport {
  level: number;
  seed_index: number;
  bucket: number;
}

export interface VecReport {
  level: number;
  row: number;
  /** 16 lowercase hex digits. */
  nonce: string;
  index: number;
}

/** The tree round's wire message (common/wire/messages.py DeviceMessage), fields in wire order. */
export interface DeviceMessage {
  round_id: string;
  message_id: string;
  protocol: number;
  hist: HistReport | null;
  vec: VecReport | null;
}

/** What a round's config fixes for every device: public objects and exact numerators, derived once. */
export interface TreeRound {
  config: TreeConfig;
  public: TreePublic;
  keepNumerator: number | null;
  vec: PrivUnitParams | null;
  root: PrivUnitParams | null;
}

export function prepareTree(config: TreeConfig): TreeRound {
  const c = config;
  const hist = c.eps_hist > 0 && c.levels > 0;
  return {
    config: c,
    public: treePublic(c),
    keepNumerator: hist ? grrKeepNumerator(c.eps_hist, c.hist_buckets) : null,
    vec: c.eps_vec > 0
      ? { dim: c.dim, epsilon: c.eps_vec, candidates: c.vec_candidates, cap: c.vec_cap,
          capNumerator: privunitNumerator(c.eps_vec, c.vec_candidates, c.vec_cap) }
      : null,
    root: c.root_share > 0
      ? { dim: c.dim, epsilon: c.epsilon, candidates: c.root_candidates, cap: c.root_cap,
          capNumerator: privunitNumerator(c.epsilon, c.root_candidates, c.root_cap) }
      : null,
  };
}

/** The column of a node key: its top log2(columns) bits. */
export function column(key: bigint, log2Columns: number): number {
  return Number(key >> BigInt(64 - log2Columns));
}

/** Every intermediate of one encoding, for tests and audits (never sent). */
export interface TreeTrace {
  ball: Float64Array;
  path: Coords[] | null;
  root: boolean;
  /** A tree device's hist-only draw (null when the round has no hist_only_share or the device is a root device). */
  histOnly: boolean | null;
  trueBucket: number | null;
  keep: boolean | null;
  sign: number | null;
  inCap: boolean | null;
  /** The signed point PrivUnit rounded to the sphere (its cap is computed around it). */
  u: Float64Array | null;
}

export function encodeTree(round: TreeRound, point: ArrayLike<number>, rnd: DeviceRandom,
                           trace?: Partial<TreeTrace>): DeviceMessage {
  const c = round.config;
  if (point.length !== c.dim) {
    throw new ReportError(`round ${c.round_id} takes points of dimension ${c.dim}; this one has ${point.length}`);
  }
  const x = toBall(c.bound, point);
  const t = c.levels;
  const nodes = t > 0 ? path(c, round.public, x) : null;
  const root = c.root_share < 1 ? uniform(rnd) < c.root_share : true;
  const histOnly = !root && c.hist_only_share > 0 ? uniform(rnd) < c.hist_only_share : null;
  const sendsHist = !root && histOnly !== false;
  const sendsVec = root || histOnly !== true;
  let hist: HistReport | null = null;
  if (sendsHist && round.keepNumerator !== null) {
    const level = 1 + below(rnd, t);
    const seedIndex = below(rnd, c.hist_pool);
    const g = c.hist_buckets;
    const key = keyAt(round.public, level, nodes![level]!);
    const trueBucket = bucketHash(round.public.histSeeds[seedIndex]!, key, g);
    const keep = bernoulli(rnd, round.keepNumerator);
    const other = (trueBucket + 1 + below(rnd, g - 1)) % g;
    hist = { level, seed_index: seedIndex, bucket: keep ? trueBucket : other };
    if (trace) Object.assign(trace, { trueBucket, keep });
  }
  let vec: VecReport | null = null;
  const params = root ? round.root : sendsVec ? round.vec : null;
  if (params !== null && (root || t > 0)) {
    const level = root ? 0 : 1 + below(rnd, t);
    const row = below(rnd, 2 ** c.vec_columns_log2);
    const key = keyAt(round.public, level, root ? new Array<number>(c.encoder === "lsh" ? 1 : c.proj_dim).fill(0) : nodes![level]!);
    const sign = hadamardSign(row, column(key, c.vec_columns_log2));
    const signed = Float64Array.from(x, (v) => v * sign);
    const s = select(signed, params, round.public.vecKey, rnd);
    vec = { level, row, nonce: hex16(s.nonce), index: s.index };
    if (trace) Object.assign(trace, { sign, inCap: s.inCap, u: s.u });
  }
  const id = Array.from(rnd.bytes(16), (b) => b.toString(16).padStart(2, "0")).join("");
  if (trace) Object.assign(trace, { ball: x, path: nodes, root, histOnly });
  return { round_id: c.round_id, message_id: id, protocol: PROTOCOL_VERSION, hist, vec };
}

/** The JSON text the Python device sends (pydantic's model_dump_json: wire field order, no spaces). */
export function messageJson(m: DeviceMessage): string {
  const hist = m.hist === null ? "null"
    : `{"level":${m.hist.level},"seed_index":${m.hist.seed_index},"bucket":${m.hist.bucket}}`;
  const vec = m.vec === null ? "null"
    : `{"level":${m.vec.level},"row":${m.vec.row},"nonce":"${m.vec.nonce}","index":${m.vec.index}}`;
  return `{"round_id":${JSON.stringify(m.round_id)},"message_id":"${m.message_id}","protocol":${m.protocol},` +
    `"hist":${hist},"vec":${vec}}`;
}

/**
 * The binary body of tree reports (common/wire/binary.py, format 2):
 * "SHB" | 2 | protocol | n x (message id 16 | hist_level i8 | hist_seed u16 |
 * hist_bucket u32 | vec_level i8 | vec_row u32 | vec_nonce u64 | vec_index u16), little-endian.
 */
export function messagesBinary(ms: readonly DeviceMessage[]): Uint8Array {
  const out = new Uint8Array(5 + 38 * ms.length);
  out.set([0x53, 0x48, 0x42, 2, PROTOCOL_VERSION]);
  const view = new DataView(out.buffer);
  ms.forEach((m, i) => {
    const o = 5 + 38 * i;
    for (let j = 0; j < 16; j++) out[o + j] = parseInt(m.message_id.slice(2 * j, 2 * j + 2), 16);
    view.setInt8(o + 16, m.hist ? m.hist.level : -1);
    view.setUint16(o + 17, m.hist ? m.hist.seed_index : 0, true);
    view.setUint32(o + 19, m.hist ? m.hist.bucket : 0, true);
    view.setInt8(o + 23, m.vec ? m.vec.level : -1);
    view.setUint32(o + 24, m.vec ? m.vec.row : 0, true);
    view.setBigUint64(o + 28, m.vec ? BigInt("0x" + m.vec.nonce) : 0n, true);
    view.setUint16(o + 36, m.vec ? m.vec.index : 0, true);
  });
  return out;
}
