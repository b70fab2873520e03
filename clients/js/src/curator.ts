/**
 * Curator rounds (docs/protocol/curator.md): the server is a trusted curator,
 * the device seals its raw records to it (through the shuffler). No
 * randomiser runs on the device and there is **no local guarantee**.
 *
 * - central: one PointMessage of the device's records (1 to
 *   records_per_device), each mapped into the unit ball, sealed;
 * - continual: an insertion (StreamMessage op "insert", a random 128-bit
 *   item, the ball point) and its withdrawal (op "delete", same item), both
 *   sealed at once; the withdrawal is kept for later.
 *
 * Device randomness, in order (the vectors' reads): central: message id,
 * then the seal's ephemeral key and nonce; continual: item, the insertion's
 * message id, its seal, the withdrawal's message id, its seal.
 *
 * The Device (device.ts) records these rounds in its ledger with the
 * operator's statement of the curator's (eps, delta), as the spec allows; the
 * curator's composition itself is not computed in TypeScript.
 */

import { toBall } from "./bounds.js";
import { checkProtocol, int, parseBound, type Bound } from "./config.js";
import { ConfigError, ReportError } from "./errors.js";
import { pyAsciiString, pyFloat, type JsonObject, type JsonValue } from "./json.js";
import { PROTOCOL_VERSION } from "./public-stream.js";
import type { DeviceRandom } from "./random.js";
import { seal, sealedSubmission } from "./seal.js";
import { toHex, utf8 } from "./encoding.js";

export interface CuratorConfig {
  kind: "central" | "continual";
  protocol: number;
  round_id: string;
  dim: number;
  bound: Bound;
  /** central: 1..64; continual: 1. */
  records_per_device: number;
  /** The kind's own parameters (central `spec`, continual `params`): carried, not read by the device. */
  rest: JsonObject;
}

export function parseCuratorConfig(data: JsonValue | Record<string, unknown>): CuratorConfig {
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new ConfigError("a config is a JSON object");
  const d = data as Record<string, unknown>;
  const protocol = checkProtocol(d);
  const kind = d["kind"];
  if (kind !== "central" && kind !== "continual") throw new ConfigError(`this is a ${String(kind)} round's config, not a curator round's`);
  const allowed = kind === "central"
    ? ["kind", "protocol", "round_id", "k", "dim", "bound", "n_expected", "records_per_device", "spec"]
    : ["kind", "protocol", "round_id", "k", "dim", "bound", "params"];
  for (const key of Object.keys(d)) if (!allowed.includes(key)) throw new ConfigError(`not a ${kind} config: unknown field ${key}`);
  const dim = int(d, "dim", 1, 100_000);
  const roundId = d["round_id"];
  if (typeof roundId !== "string" || roundId.length < 1 || roundId.length > 64) throw new ConfigError("round_id must be a string of 1 to 64 characters");
  const records = kind === "central" ? (d["records_per_device"] === undefined ? 1 : int(d, "records_per_device", 1, 64)) : 1;
  const rest: JsonObject = {};
  for (const key of ["spec", "params"]) if (d[key] !== undefined) rest[key] = d[key] as JsonValue;
  return { kind, protocol, round_id: roundId, dim, bound: parseBound(d["bound"], dim), records_per_device: records, rest };
}

function hex(b: Uint8Array): string {
  return toHex(b);
}

// These messages are written by the reference's `messages.device_json`: json.dumps with compact
// separators (floats as Python's repr, strings ASCII-escaped), not by pydantic.
function pointText(p: Float64Array): string {
  return `[${Array.from(p, pyFloat).join(",")}]`;
}

function ballRecords(c: CuratorConfig, records: readonly ArrayLike<number>[]): Float64Array[] {
  if (records.length < 1 || records.length > c.records_per_device) {
    throw new ReportError(`round ${c.round_id} takes 1 to ${c.records_per_device} records per device, got ${records.length}`);
  }
  return records.map((r) => {
    if (r.length !== c.dim) throw new ReportError(`round ${c.round_id} takes points of dimension ${c.dim}; this one has ${r.length}`);
    return toBall(c.bound, r);
  });
}

/** A central round's PointMessage (JSON as pydantic writes it) and its sealed submission. */
export function encodeCentral(c: CuratorConfig, records: readonly ArrayLike<number>[], serverKey: Uint8Array,
                              digest: string, rnd: DeviceRandom): { json: string; submission: string } {
  if (c.kind !== "central") throw new ConfigError("not a central round");
  const ball = ballRecords(c, records);
  const id = hex(rnd.bytes(16));
  const json = `{"round_id":${pyAsciiString(c.round_id)},"message_id":"${id}","protocol":${PROTOCOL_VERSION},` +
    `"points":[${ball.map(pointText).join(",")}]}`;
  return { json, submission: sealedSubmission(seal(utf8(json), serverKey, c.round_id, rnd), digest) };
}

/** A continual round's insertion and withdrawal (JSON, and sealed submissions). */
export function encodeContinual(c: CuratorConfig, point: ArrayLike<number>, serverKey: Uint8Array, digest: string,
                                rnd: DeviceRandom): { insert: string; withdraw: string; insertSubmission: string; withdrawSubmission: string } {
  if (c.kind !== "continual") throw new ConfigError("not a continual round");
  const [x] = ballRecords(c, [point]);
  const item = hex(rnd.bytes(16));
  const head = (id: string) => `{"round_id":${pyAsciiString(c.round_id)},"message_id":"${id}","protocol":${PROTOCOL_VERSION},`;
  const insert = `${head(hex(rnd.bytes(16)))}"op":"insert","item":"${item}","point":${pointText(x!)}}`;
  const insertSubmission = sealedSubmission(seal(utf8(insert), serverKey, c.round_id, rnd), digest);
  const withdraw = `${head(hex(rnd.bytes(16)))}"op":"delete","item":"${item}","point":null}`;
  const withdrawSubmission = sealedSubmission(seal(utf8(withdraw), serverKey, c.round_id, rnd), digest);
  return { insert, withdraw, insertSubmission, withdrawSubmission };
}
