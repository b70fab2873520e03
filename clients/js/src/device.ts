/**
 * The edge device (client/device.py): fetch a round's config, verify it
 * against the pinned server key, check the ledger, encode once, send. Uses
 * `fetch` (browsers, Node >= 18). Transport failures and 5xx answers are
 * retried with exponential backoff and always resend the *same* recorded
 * message (same message id), which the server counts once.
 *
 * Implemented round kinds: tree (local and shuffle model), local_refine,
 * sketch (local without subsampling; shuffle), and the secure-sum kinds
 * (refine, partition, elbow) and the curator kinds (central, continual),
 * these only with the owner's consent (`allowNoLocalGuarantee`), a pinned key
 * and a shuffler. A curator round's ledger entry takes the operator's
 * statement for the curator's (eps, delta) (GET /rounds/{id}: `privacy`),
 * as docs/protocol/curator.md allows, with group privacy over a central
 * device's records.
 */

import { checkProtocol, parseTreeConfig, type TreeConfig } from "./config.js";
import { fromBase64, utf8 } from "./encoding.js";
import { ConfigError, PrivacyError, ReportError, TransportError } from "./errors.js";
import { fsum, Ledger, type Spend } from "./ledger.js";
import { parseJson, type JsonObject } from "./json.js";
import { OsRandom, type DeviceRandom } from "./random.js";
import { seal, sealedSubmission } from "./seal.js";
import { checkPin, configDigest, verifyConfig } from "./signing.js";
import { encodeTree, messageJson, messagesBinary, prepareTree, type DeviceMessage, type TreeRound } from "./tree.js";
import { codebookJson, encodeLocalRefine, parseLocalRefineConfig, prepareLocalRefine } from "./local-refine.js";
import { encodeCentral, encodeContinual, parseCuratorConfig } from "./curator.js";
import { contribution, encodeShares, parseSharesConfig, sharesSubmission } from "./secure-sum.js";
import { encodeSketch, parseSketchConfig, prepareSketch, recordedBinary, sketchBinary, sketchJson } from "./sketch.js";

export interface DeviceOptions {
  serverUrl: string;
  ledger: Ledger;
  /** The server identity's fingerprint ("sha256:" + 64 hex), given out of band. */
  serverKey?: string;
  shufflerUrl?: string;
  /** Issued by the shuffler's operator (POST /enrol); identifies the device to the shuffler only. */
  deviceToken?: string;
  /** The owner's consent to secure-sum rounds, whose shares carry no local guarantee. */
  allowNoLocalGuarantee?: boolean;
  /** Send a local-model tree report as its 43-byte binary body (default) instead of JSON. */
  binary?: boolean;
  retries?: number;
  backoffMs?: number;
  random?: DeviceRandom;
  fetch?: typeof fetch;
}

/** The local eps a tree round charges (events.local_epsilon of its ChoiceEvent). */
export function deviceEpsilon(c: TreeConfig): number {
  const options: number[] = [];
  const hist = c.eps_hist > 0 && c.levels > 0 ? c.eps_hist : 0;
  const vec = c.eps_vec > 0 ? c.eps_vec : 0;
  if (1 - c.root_share > 0) {
    // One report per tree device (hist_only_share > 0): the histogram or the vector report alone.
    if (c.hist_only_share > 0) options.push(hist, vec);
    else options.push(fsum([hist, vec]));
  }
  if (c.root_share > 0) options.push(c.epsilon);
  return Math.max(...options);
}

export class Device {
  readonly serverUrl: string;
  readonly ledger: Ledger;
  readonly serverKey: string | null;
  private readonly opts: DeviceOptions;
  private readonly rnd: DeviceRandom;
  private readonly http: typeof fetch;
  private readonly rounds = new Map<string, TreeRound>();

  constructor(opts: DeviceOptions) {
    this.opts = opts;
    this.serverUrl = opts.serverUrl.replace(/\/+$/, "");
    this.ledger = opts.ledger;
    this.serverKey = opts.serverKey ? checkPin(opts.serverKey) : null;
    this.rnd = opts.random ?? new OsRandom();
    this.http = opts.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /**
   * Encode `point` for the round (once, ever, for this ledger) and deliver it. Returns the
   * server's or shuffler's answer. In a local sketch round `point` may also be the device's
   * records (an array of points): one sketch summarises them all.
   */
  async participate(roundId: string, pointOrRecords: ArrayLike<number> | readonly ArrayLike<number>[]): Promise<unknown> {
    const records: readonly ArrayLike<number>[] = isRecords(pointOrRecords) ? pointOrRecords : [pointOrRecords as ArrayLike<number>];
    const point = records[0] ?? [];
    let message = await this.ledger.messageFor(roundId);
    if (message === null) {
      const info = (await this.request("GET", `/rounds/${roundId}`)).json as Record<string, unknown>;
      const state = info["state"];
      if (state !== "open") throw new TransportError(`round ${roundId} is ${String(state)}, not open: nothing was sent and nothing charged`);
      const { config, key, digest } = await this.verified(roundId);
      const kind = config["kind"] ?? "tree";
      if (records.length !== 1 && kind !== "sketch" && kind !== "central") throw new ReportError(`round ${roundId} takes one point per device`);
      if (kind === "local_refine") {
        message = await this.localRefine(roundId, config, point);
        return (await this.send(roundId, message)).json;
      }
      if (kind === "central" || kind === "continual") {
        message = await this.curator(roundId, config, records, key, digest, info);
        return (await this.send(roundId, message)).json;
      }
      if (kind === "refine" || kind === "partition" || kind === "elbow" || (kind === "sketch" && config["model"] === "shuffle")) {
        message = await this.shares(roundId, config, records, key, digest);
        return (await this.send(roundId, message)).json;
      }
      if (kind === "sketch") {
        message = await this.sketch(roundId, config, records);
        return (await this.send(roundId, message)).json;
      }
      if (kind !== "tree") throw new ConfigError(`this device cannot take part in ${String(kind)} rounds (it knows ['central', 'continual', 'elbow', 'local_refine', 'partition', 'refine', 'sketch', 'tree'])`);
      const round = this.prepared(roundId, config);
      const c = round.config;
      if (point.length !== c.dim) throw new ReportError(`round ${roundId} takes points of dimension ${c.dim}; this one has ${point.length}`);
      for (let i = 0; i < point.length; i++) {
        if (!Number.isFinite(point[i]!)) throw new ReportError(`round ${roundId}: the point has non-finite coordinates`);
      }
      if (c.model === "shuffle") {
        if (!this.opts.shufflerUrl) throw new TransportError(`round ${roundId} is a shuffle-model round: it needs a shufflerUrl`);
        if (this.serverKey === null) throw new TransportError(`round ${roundId} is a shuffle-model round: it needs a pinned serverKey`);
      }
      const spend: Spend = { guarantee: "local", epsilon: deviceEpsilon(c), note: `${c.model} tree round` };
      message = await this.ledger.record(roundId, spend, () => {
        const json = messageJson(encodeTree(round, point, this.rnd));
        return c.model === "shuffle" ? sealedSubmission(seal(utf8(json), key, roundId, this.rnd), digest) : json;
      });
    }
    return (await this.send(roundId, message)).json;
  }

  private async localRefine(roundId: string, config: JsonObject, point: ArrayLike<number>): Promise<string> {
    const round = prepareLocalRefine(parseLocalRefineConfig(config));
    const c = round.config;
    if (point.length !== c.dim) throw new ReportError(`round ${roundId} takes points of dimension ${c.dim}; this one has ${point.length}`);
    const spend: Spend = { guarantee: "local", epsilon: c.privunit.epsilon, family: c.parent_id, note: `local refine of ${c.parent_id}` };
    return this.ledger.record(roundId, spend, () => codebookJson(encodeLocalRefine(round, point, this.rnd)));
  }

  /** Delete this device's point from a continual round: the withdrawal sealed when it was inserted. */
  async withdraw(roundId: string): Promise<unknown> {
    const message = await this.ledger.withdrawalFor(roundId);
    if (message === null) throw new TransportError(`this device inserted nothing it can withdraw from round ${roundId}`);
    return (await this.send(roundId, message)).json;
  }

  private consent(roundId: string, what: string, eps: number, delta: number): void {
    if (!this.opts.shufflerUrl) throw new TransportError(`round ${roundId} is a ${what} round: it needs a shufflerUrl`);
    if (this.serverKey === null) throw new TransportError(`round ${roundId} is a ${what} round: it needs a pinned serverKey`);
    if (!this.opts.allowNoLocalGuarantee) {
      throw new PrivacyError(`round ${roundId} is a ${what} round: no local DP guarantee (central eps=${eps}, delta=${delta} ` +
        "hold only for what the server releases, if the shuffler does not collude with it); take part only with the owner's " +
        "consent: new Device({..., allowNoLocalGuarantee: true})");
    }
  }

  private async curator(roundId: string, config: JsonObject, records: readonly ArrayLike<number>[], key: Uint8Array,
                        digest: string, info: Record<string, unknown>): Promise<string> {
    const c = parseCuratorConfig(config);
    const privacy = (info["privacy"] ?? {}) as Record<string, unknown>;
    const eps = typeof privacy["epsilon"] === "number" ? privacy["epsilon"] : NaN;
    const delta = typeof privacy["delta"] === "number" ? privacy["delta"] : 0;
    if (!Number.isFinite(eps)) throw new ConfigError(`round ${roundId} states no central epsilon`);
    if (c.kind === "central") {
      const r = records.length;
      const [e, d] = [r * eps, Math.min(1, r * Math.exp((r - 1) * eps) * delta)]; // group privacy over the device's records
      this.consent(roundId, "central", e, d);
      const spend: Spend = { guarantee: "none", epsilon: 0, central_epsilon: e, delta: d,
        note: `central model: the server (curator) sees this device's raw point${r > 1 ? "s" : ""}; no local guarantee` };
      return this.ledger.record(roundId, spend, () => encodeCentral(c, records, key, digest, this.rnd).submission);
    }
    if (records.length !== 1) throw new ReportError(`round ${roundId} takes one point per device`);
    this.consent(roundId, "continual", eps, delta);
    const spend: Spend = { guarantee: "none", epsilon: 0, central_epsilon: eps, delta,
      note: "continual model: the server (curator) sees this device's raw point; no local guarantee" };
    return this.ledger.record(roundId, spend, () => {
      const m = encodeContinual(c, records[0]!, key, digest, this.rnd);
      return [m.insertSubmission, m.withdrawSubmission];
    });
  }

  private async shares(roundId: string, config: JsonObject, records: readonly ArrayLike<number>[], key: Uint8Array,
                       digest: string): Promise<string> {
    const c = parseSharesConfig(config);
    if (records.length !== 1) throw new ReportError(`round ${roundId} takes one record per device`);
    if (!this.opts.shufflerUrl) throw new TransportError(`round ${roundId} is a secure-sum round: it needs a shufflerUrl`);
    if (this.serverKey === null) throw new TransportError(`round ${roundId} is a secure-sum round: it needs a pinned serverKey`);
    if (!this.opts.allowNoLocalGuarantee) {
      throw new PrivacyError(`round ${roundId} is a secure-sum round: this device's shares carry no local DP guarantee ` +
        `(central eps=${c.secure_sum.epsilon}, delta=${c.secure_sum.delta} hold only if the shuffler does not collude with the server); ` +
        "take part only with the owner's consent: new Device({..., allowNoLocalGuarantee: true})");
    }
    const v = contribution(c, records[0]!);
    const spend: Spend = { guarantee: "none", epsilon: 0, central_epsilon: c.secure_sum.epsilon, delta: c.secure_sum.delta,
      note: "secure sum: no local guarantee" };
    return this.ledger.record(roundId, spend, () => sharesSubmission(encodeShares(v, c.secure_sum, this.rnd), roundId, key, digest, this.rnd));
  }

  private async sketch(roundId: string, config: JsonObject, records: readonly ArrayLike<number>[]): Promise<string> {
    const round = prepareSketch(parseSketchConfig(config));
    const c = round.config;
    for (const r of records) {
      if (r.length !== c.dim) throw new ReportError(`round ${roundId} takes points of dimension ${c.dim}; this one has ${r.length}`);
      for (let i = 0; i < r.length; i++) if (!Number.isFinite(r[i]!)) throw new ReportError(`round ${roundId}: a record has non-finite coordinates`);
    }
    if (c.model !== "local") throw new ConfigError(`round ${roundId} is a shuffle-model sketch round: not implemented in this device`);
    const n0 = records.length;
    const spend: Spend = { guarantee: "local", epsilon: n0 * c.sketch.epsilon,
      note: `sketch of ${n0} records: eps ${c.sketch.epsilon} per record, ${n0} x for the user` };
    return this.ledger.record(roundId, spend, () => recordedBinary(sketchBinary(encodeSketch(round, records, this.rnd))));
  }

  private prepared(roundId: string, config: JsonObject): TreeRound {
    const c = parseTreeConfig(config);
    const cached = this.rounds.get(roundId);
    if (cached && cached.config.seed === c.seed && JSON.stringify(cached.config, bigints) === JSON.stringify(c, bigints)) return cached;
    const round = prepareTree(c);
    this.rounds.set(roundId, round);
    return round;
  }

  private async verified(roundId: string): Promise<{ config: JsonObject; key: Uint8Array; digest: string }> {
    const body = parseJson((await this.request("GET", `/rounds/${roundId}/config`)).text);
    if (this.serverKey !== null) {
      const v = verifyConfig(body, roundId, this.serverKey);
      checkProtocol(v.config);
      return { config: v.config, key: v.serverPublicKey, digest: v.digest };
    }
    const b = body as JsonObject;
    const config = b["config"] as JsonObject;
    checkProtocol(config);
    const spk = b["server_public_key"] as string;
    return { config, key: fromBase64(spk), digest: configDigest(config, spk) };
  }

  private async send(roundId: string, message: string): Promise<{ json: unknown }> {
    if (message.startsWith('{"sealed"') || message.startsWith('{"parts"')) {
      if (!this.opts.shufflerUrl) throw new TransportError(`a sealed message for round ${roundId} needs a shufflerUrl`);
      if (!this.opts.deviceToken) throw new TransportError(`round ${roundId} goes through the shuffler: this device needs a token the operator enrolled there`);
      return this.request("POST", `/rounds/${roundId}/messages`, message, "application/json", this.opts.shufflerUrl,
        { "X-Device-Token": this.opts.deviceToken });
    }
    if (message.startsWith('{"binary"')) {
      const body = fromBase64((JSON.parse(message) as { binary: string }).binary);
      if (this.opts.binary ?? true) return this.request("POST", `/rounds/${roundId}/reports/binary`, body, "application/octet-stream");
      return this.request("POST", `/rounds/${roundId}/reports`, sketchJson(roundId, body), "application/json");
    }
    const parsed = JSON.parse(message) as Partial<DeviceMessage>;
    if ((this.opts.binary ?? true) && "hist" in parsed && "vec" in parsed) {
      const m = parsed as DeviceMessage;
      return this.request("POST", `/rounds/${roundId}/reports/binary`, messagesBinary([m]), "application/octet-stream");
    }
    return this.request("POST", `/rounds/${roundId}/reports`, message, "application/json");
  }

  private async request(method: string, path: string, body?: string | Uint8Array, contentType?: string,
                        base?: string, headers: Record<string, string> = {}): Promise<{ text: string; json: unknown }> {
    const retries = this.opts.retries ?? 5;
    let delay = this.opts.backoffMs ?? 200;
    let last = "";
    for (let attempt = 0; attempt <= retries; attempt++) {
      try {
        const init: RequestInit = { method, headers: { ...headers, ...(contentType ? { "content-type": contentType } : {}) } };
        if (body !== undefined) init.body = body as BodyInit;
        const r = await this.http((base ?? this.serverUrl).replace(/\/+$/, "") + path, init);
        const text = await r.text();
        if (r.status < 500) {
          if (r.status >= 400) throw new TransportError(`${method} ${path} -> ${r.status}: ${text}`);
          let json: unknown = null;
          try {
            json = JSON.parse(text);
          } catch {
            json = text;
          }
          return { text, json };
        }
        last = `${r.status}: ${text}`;
      } catch (e) {
        if (e instanceof TransportError) throw e;
        last = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      }
      if (attempt < retries) {
        await new Promise((r) => setTimeout(r, delay));
        delay *= 2;
      }
    }
    throw new TransportError(`${method} ${path} failed after ${retries + 1} attempts: ${last}`);
  }
}

function isRecords(v: ArrayLike<number> | readonly ArrayLike<number>[]): v is readonly ArrayLike<number>[] {
  return v.length > 0 && typeof v[0] === "object" && v[0] !== null;
}

function bigints(_k: string, v: unknown): unknown {
  return typeof v === "bigint" ? v.toString() : v;
}
