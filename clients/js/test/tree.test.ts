import { test, eq, deepEq, ok, throws, ulps } from "./harness.js";
import { reference, type TreeCase } from "./reference.js";
import { parseJson } from "../src/json.js";
import { checkProtocol, parseTreeConfig } from "../src/config.js";
import { grrKeepNumerator, privunitNumerator } from "../src/exact.js";
import { toBall } from "../src/bounds.js";
import { keyAt, path } from "../src/nets.js";
import { bucketHash, hadamardSign } from "../src/hashing.js";
import { projectionScale, treePublic } from "../src/tree-public.js";
import { PROTOCOL_VERSION } from "../src/public-stream.js";
import { SHARED_MIN_DIM, candidateInto, capMask, scores } from "../src/privunit.js";
import { deviceEpsilon } from "../src/device.js";
import { column, encodeTree, messageJson, messagesBinary, prepareTree, type TreeTrace } from "../src/tree.js";
import { BytesRandom, OsRandom } from "../src/random.js";

// Gaussians may differ by 4 ulps (spec); one more rounding (x a, or / norm) adds at most 1.
const GAUSS_ULPS = 5;

function worstUlps(a: ArrayLike<number>, b: readonly number[]): number {
  eq(a.length, b.length, "length");
  let w = 0;
  for (let i = 0; i < b.length; i++) w = Math.max(w, ulps(a[i]!, b[i]!));
  return w;
}

function cfg(c: TreeCase) {
  return parseTreeConfig(parseJson(c.config_text));
}

test("calibration: GRR keep numerators equal Python's on 72 (eps, g) pairs", () => {
  for (const g of reference.calibration.grr) eq(grrKeepNumerator(g.epsilon, g.buckets), g.keep, `eps ${g.epsilon}, g ${g.buckets}`);
});

test("calibration: PrivUnit cap numerators equal Python's (N, K as published)", () => {
  for (const c of reference.calibration.cap) {
    eq(privunitNumerator(c.epsilon, c.candidates, c.cap), c.numerator, `eps ${c.epsilon}, N ${c.candidates}, K ${c.cap}`);
    // the exact worst-case ratio is within e^eps
    const a = c.numerator;
    ok(Math.log(a * (c.candidates - c.cap)) - Math.log(c.cap * (2 ** 32 - a)) <= c.epsilon, "ratio <= e^eps");
  }
});

for (const c of reference.tree) {
  test(`tree ${c.name}: the config parses, and its protocol is checked first`, () => {
    const conf = cfg(c);
    eq(conf.seed.toString(), (JSON.parse(c.config_text.replace(/"seed": (\d+)/, '"seed": "$1"')) as { seed: string }).seed, "exact seed");
    const raw = parseJson(c.config_text) as Record<string, unknown>;
    delete raw["protocol"];
    throws(() => parseTreeConfig(raw), /ConfigError: .*no protocol version/, "a config without protocol");
    throws(() => checkProtocol({ ...raw, protocol: 3n }), /ConfigError: this round speaks protocol 3/, "protocol 3");
    throws(() => parseTreeConfig({ ...(parseJson(c.config_text) as object), extra: 1n }), /unknown field extra/, "unknown field");
  });

  test(`tree ${c.name}: every public object from the seed (exact, Gaussians within ${GAUSS_ULPS} ulps)`, () => {
    const conf = cfg(c);
    const pub = treePublic(conf);
    eq(projectionScale(conf.proj_dim), c.projection_scale, "projection scale");
    if (c.public.projection === null) eq(pub.projection, null, "no projection");
    else ok(worstUlps(pub.projection!, c.public.projection) <= GAUSS_ULPS, "projection");
    deepEq(Array.from(pub.shifts), c.public.shifts, "lattice shifts (exact)");
    if (conf.encoder === "lsh") ok(worstUlps(pub.planes, c.public.planes) <= 4, "SimHash planes");
    else eq(pub.planes.length, 0, "no planes (the reference holds zeros)");
    deepEq(pub.levelKeys.map(String), c.public.level_keys, "level keys");
    deepEq(pub.histSeeds.map(String), c.public.hist_seeds, "OLH seed pool");
    eq(String(pub.vecKey), c.public.vec_key, "PrivUnit key");
    const round = prepareTree(conf);
    eq(round.keepNumerator, c.keep_numerator, "GRR keep numerator");
    eq(round.vec?.capNumerator ?? null, c.vec_numerator, "vec cap numerator");
    eq(round.root?.capNumerator ?? null, c.root_numerator, "root cap numerator");
  });

  test(`tree ${c.name}: ball points, paths, node keys, OLH buckets and Hadamard signs of 12 devices`, () => {
    const conf = cfg(c);
    const pub = treePublic(conf);
    let exactBall = 0;
    c.devices.forEach((d, i) => {
      const x = toBall(conf.bound, d.point);
      ok(worstUlps(x, d.ball) <= 4, `device ${i} ball point`);
      if (worstUlps(x, d.ball) === 0) exactBall++;
      const p = path(conf, pub, x);
      deepEq(p.map((n) => n.map(String)), d.path, `device ${i} path`);
      deepEq(p.map((n, j) => String(keyAt(pub, j, n))), d.keys, `device ${i} keys`);
      if (conf.levels > 0) {
        const key = keyAt(pub, d.level, p[d.level]!);
        eq(bucketHash(pub.histSeeds[d.seed_index]!, key, conf.hist_buckets), d.true_bucket, `device ${i} true bucket`);
        eq(column(key, conf.vec_columns_log2), d.column, `device ${i} column`);
        eq(hadamardSign(d.row, d.column), d.sign, `device ${i} sign`);
      }
    });
    ok(exactBall >= 6, `only ${exactBall} of 12 ball points bit exact`);
    const rootKey = keyAt(pub, 0, new Array<number>(conf.encoder === "lsh" ? 1 : conf.proj_dim).fill(0));
    eq(column(rootKey, conf.vec_columns_log2), c.root_column, "root column");
  });

  test(`tree ${c.name}: PrivUnit candidates of a nonce (within ${GAUSS_ULPS} ulps) and the cap of a direction (exact)`, () => {
    const round = prepareTree(cfg(c));
    const params = c.privunit.params === "vec" ? round.vec! : round.root!;
    const nonce = BigInt(c.privunit.nonce);
    const v = new Float64Array(params.dim);
    c.privunit.candidates_head.forEach((want, i) => {
      candidateInto(round.public.vecKey, nonce, i, params.dim, v);
      ok(worstUlps(v, want) <= GAUSS_ULPS, `candidate ${i}`);
    });
    candidateInto(round.public.vecKey, nonce, params.candidates - 1, params.dim, v);
    ok(worstUlps(v, c.privunit.candidates_last) <= GAUSS_ULPS, "last candidate");
    const u = Float64Array.from(c.privunit.u);
    const sc = scores(round.public.vecKey, nonce, u, params);
    // scores() builds candidates on its own fast path: it must agree with candidateInto
    candidateInto(round.public.vecKey, nonce, 3, params.dim, v);
    const direct = v.reduce((s, vj, j) => s + vj * u[j]!, 0);
    // fresh: the same sum in the same order; shared: the codebook's order (a few ulps apart at most)
    if (params.dim < SHARED_MIN_DIM) eq(sc[3], direct, "fast-path score of candidate 3");
    else ok(Math.abs(sc[3]! - direct) <= 1e-14, "shared-codebook score of candidate 3");
    const mask = capMask(sc, params.cap);
    deepEq(Array.from(mask.keys()).filter((i) => mask[i]), c.privunit.cap, "the cap");
  });

  test(`tree ${c.name}: messages (OS randomness) are well formed, JSON and binary`, () => {
    const conf = cfg(c);
    const round = prepareTree(conf);
    const rnd = new OsRandom();
    for (const d of c.devices.slice(0, 6)) {
      const m = encodeTree(round, d.point, rnd);
      const text = messageJson(m);
      const back = JSON.parse(text) as Record<string, unknown>;
      deepEq(Object.keys(back), ["round_id", "message_id", "protocol", "hist", "vec"], "field order");
      ok(/^[0-9a-f]{32}$/.test(m.message_id), "message id");
      eq(m.protocol, PROTOCOL_VERSION, "protocol");
      if (m.vec && m.vec.level === 0) eq(m.hist, null, "a root device sends its root report alone");
      else if (conf.hist_only_share > 0) ok((m.hist === null) !== (m.vec === null), "one report per tree device");
      else {
        ok(m.hist !== null && m.hist.level >= 1 && m.hist.level <= conf.levels, "hist level");
        ok(m.hist!.seed_index < conf.hist_pool && m.hist!.bucket < conf.hist_buckets, "hist seed and bucket");
        if (conf.eps_vec > 0) ok(m.vec !== null && m.vec.level >= 1 && m.vec.level <= conf.levels, "vec level");
      }
      if (m.vec) {
        ok(/^[0-9a-f]{16}$/.test(m.vec.nonce), "nonce");
        ok(m.vec.row < 2 ** conf.vec_columns_log2, "row");
        ok(m.vec.index < (m.vec.level === 0 ? conf.root_candidates : conf.vec_candidates), "index");
      }
      eq(messagesBinary([m]).length, 5 + 38, "binary length");
    }
  });
}

test("tree: injected device randomness gives the same message twice, and runs out loudly", () => {
  const c = reference.tree[2]!;
  const round = prepareTree(cfg(c));
  const bytes = new Uint8Array(4096);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
  const a = messageJson(encodeTree(round, c.devices[0]!.point, new BytesRandom(bytes)));
  const b = messageJson(encodeTree(round, c.devices[0]!.point, new BytesRandom(bytes)));
  eq(a, b, "same bytes, same message");
  throws(() => encodeTree(round, c.devices[0]!.point, new BytesRandom(bytes.slice(0, 20))), /ran out/, "exhausted");
});

test("tree: the JSON form is pydantic's (a fixed message, byte for byte)", () => {
  const text = messageJson({ round_id: "r-1", message_id: "00112233445566778899aabbccddeeff", protocol: 1,
    hist: { level: 3, seed_index: 17, bucket: 2 }, vec: { level: 2, row: 1000, nonce: "00000000000000ff", index: 7 } });
  // DeviceMessage(...).model_dump_json() of the same fields
  eq(text, '{"round_id":"r-1","message_id":"00112233445566778899aabbccddeeff","protocol":1,' +
    '"hist":{"level":3,"seed_index":17,"bucket":2},"vec":{"level":2,"row":1000,"nonce":"00000000000000ff","index":7}}', "json");
  eq(messageJson({ round_id: "r", message_id: "0".repeat(32), protocol: 1, hist: null,
    vec: { level: 0, row: 1, nonce: "0".repeat(16), index: 0 } }),
  '{"round_id":"r","message_id":"00000000000000000000000000000000","protocol":1,"hist":null,' +
    '"vec":{"level":0,"row":1,"nonce":"0000000000000000","index":0}}', "root message");
});

test("tree: GRR keeps the true bucket at A / 2^32 and PrivUnit picks its cap at p_c (2000 devices, 5 sigma)", () => {
  const c = reference.tree[2]!; // lsh, eps_hist ~0.86, 3 buckets
  const round = prepareTree(cfg(c));
  const rnd = new OsRandom();
  let hist = 0, kept = 0, vec = 0, inCap = 0, roots = 0;
  const n = 2000;
  for (let i = 0; i < n; i++) {
    const trace: Partial<TreeTrace> = {};
    const m = encodeTree(round, c.devices[i % 12]!.point, rnd, trace);
    if (trace.root) roots++;
    if (m.hist) {
      hist++;
      if (trace.keep) kept++;
      eq(m.hist.bucket === trace.trueBucket, trace.keep || m.hist.bucket === trace.trueBucket, "kept means true bucket");
      if (!trace.keep) ok(m.hist.bucket !== trace.trueBucket, "a replaced bucket is another bucket");
    }
    if (m.vec && m.vec.level > 0) {
      vec++;
      if (trace.inCap) inCap++;
    }
  }
  const within = (k: number, total: number, p: number, what: string) => {
    const sd = Math.sqrt(total * p * (1 - p));
    ok(Math.abs(k - total * p) <= 5 * sd, `${what}: ${k} of ${total}, expected ${(total * p).toFixed(1)} +- ${sd.toFixed(1)}`);
  };
  within(roots, n, round.config.root_share, "root devices");
  within(kept, hist, round.keepNumerator! / 2 ** 32, "GRR keep");
  within(inCap, vec, round.vec!.capNumerator / 2 ** 32, "PrivUnit cap");
});

/** reference.tree[2]'s config as a one-report-per-tree-device round (hist_only_share), with `changes`. */
function oneReportConfig(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...(parseJson(reference.tree[2]!.config_text) as Record<string, unknown>), hist_only_share: 0.5, ...changes };
}

test("tree: with hist_only_share a tree device sends exactly one report, the hist one at that share (2000 devices, 5 sigma)", () => {
  const round = prepareTree(parseTreeConfig(oneReportConfig()));
  const rnd = new OsRandom();
  let tree = 0, histOnly = 0;
  const n = 2000;
  for (let i = 0; i < n; i++) {
    const trace: Partial<TreeTrace> = {};
    const m = encodeTree(round, reference.tree[2]!.devices[i % 12]!.point, rnd, trace);
    if (trace.root) { eq(m.hist, null, "root: no hist"); eq(m.vec!.level, 0, "root: level 0"); continue; }
    tree++;
    ok((m.hist === null) !== (m.vec === null), "exactly one report");
    eq(m.hist !== null, trace.histOnly, "the hist-only draw decides which");
    if (m.hist) histOnly++;
    else ok(m.vec!.level >= 1 && m.vec!.level <= round.config.levels, "vec level");
  }
  const sd = Math.sqrt(tree * 0.25);
  ok(Math.abs(histOnly - tree / 2) <= 5 * sd, `hist-only ${histOnly} of ${tree}`);
});

test("tree: with hist_only_share the device is charged the largest single report, not their sum", () => {
  const raw = oneReportConfig({ root_share: 0, root_candidates: 0, root_cap: 0 });
  const c = parseTreeConfig(raw);
  eq(deviceEpsilon(c), Math.max(c.eps_hist, c.eps_vec), "max of the two");
  ok(deviceEpsilon(parseTreeConfig({ ...raw, hist_only_share: 0 })) > deviceEpsilon(c), "both reports cost their sum");
});

test("tree: a hist_only_share config is refused when a share is outside [0, 1) or a report is above epsilon", () => {
  throws(() => parseTreeConfig(oneReportConfig({ hist_only_share: 1 })), /hist_only_share must be a number in \[0, 1\)/, "share 1");
  throws(() => parseTreeConfig(oneReportConfig({ hist_only_share: -0.5 })), /hist_only_share must be/, "negative share");
  throws(() => parseTreeConfig(oneReportConfig({ hist_only_share: "0.5" })), /ConfigError/, "a string");
  const eps = (parseJson(reference.tree[2]!.config_text) as Record<string, number>)["epsilon"]!;
  throws(() => parseTreeConfig(oneReportConfig({ eps_vec: eps * 1.000001 })), /must each be <= epsilon/, "eps_vec above epsilon");
  throws(() => parseTreeConfig(oneReportConfig({ eps_hist: eps * 1.000001 })), /must each be <= epsilon/, "eps_hist above epsilon");
  throws(() => parseTreeConfig(oneReportConfig({ eps_vec: 0, vec_candidates: 0, vec_cap: 0 })), /needs levels > 0, eps_hist > 0 and eps_vec > 0/,
    "no vector report");
});
