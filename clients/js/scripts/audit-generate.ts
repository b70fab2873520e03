// Writes N messages per input from the TypeScript device, for the Python bit-level audit
// (scripts/audit.py). A job on stdin: {"kind": "tree" | "local_refine" | "sketch",
// "config": <published config JSON text>, "points": [[...], [...]], "samples": N,
// "out": "<prefix>", "broken": false}. Per input i it writes <prefix>-<i>.bin:
//   tree:         a binary batch of the N tree messages (common/wire/binary.py format);
//   local_refine: N codebook messages, each its nonce (u64) and index (u32), little-endian;
//   sketch:       N local sketches (one record each), each its 2m grid integers (i64), little-endian.
// Everything goes through the bundle's own encoders (src/index.ts): whatever their current
// code is, the audit sees its outputs.
// "broken": a deliberately broken sampler, which the audit must catch: tree and local refine
// use the PrivUnit/GRR numerators of "factor" (default 3) times the epsilon; sketch draws its
// discrete Laplace noise (the bundle's sampler) at 1/factor of the round's scale, on the
// device's own grid.
import { readFileSync, writeFileSync } from "node:fs";
import {
  discreteLaplace, encodeLocalRefine, encodeSketch, encodeTree, grrKeepNumerator, messagesBinary, noiseGrid, OsRandom,
  parseJson, parseLocalRefineConfig, parseSketchConfig, parseTreeConfig, prepareLocalRefine, prepareSketch, prepareTree,
  privunitNumerator, type DeviceMessage,
} from "../src/index.js";

const job = JSON.parse(readFileSync(0, "utf8")) as { kind?: string; config: string; points: number[][]; samples: number;
  out: string; broken?: boolean; factor?: number };
const f = job.factor ?? 3;
const rnd = new OsRandom();
const kind = job.kind ?? "tree";

if (kind === "tree") {
  const round = prepareTree(parseTreeConfig(parseJson(job.config)));
  if (job.broken) {
    const c = round.config;
    if (round.keepNumerator !== null) round.keepNumerator = grrKeepNumerator(f * c.eps_hist, c.hist_buckets);
    if (round.vec) round.vec.capNumerator = privunitNumerator(f * c.eps_vec, c.vec_candidates, c.vec_cap);
    if (round.root) round.root.capNumerator = privunitNumerator(f * c.epsilon, c.root_candidates, c.root_cap);
  }
  job.points.forEach((p, i) => {
    const ms: DeviceMessage[] = [];
    for (let k = 0; k < job.samples; k++) ms.push(encodeTree(round, p, rnd));
    writeFileSync(`${job.out}-${i}.bin`, messagesBinary(ms));
  });
} else if (kind === "local_refine") {
  const round = prepareLocalRefine(parseLocalRefineConfig(parseJson(job.config)));
  if (job.broken) {
    const pu = round.config.privunit;
    round.config.privunit = { ...pu, capNumerator: privunitNumerator(f * pu.epsilon, pu.candidates, pu.cap) };
  }
  job.points.forEach((p, i) => {
    const out = new DataView(new ArrayBuffer(12 * job.samples));
    for (let k = 0; k < job.samples; k++) {
      const m = encodeLocalRefine(round, p, rnd);
      out.setBigUint64(12 * k, BigInt("0x" + m.nonce), true);
      out.setUint32(12 * k + 8, m.index, true);
    }
    writeFileSync(`${job.out}-${i}.bin`, new Uint8Array(out.buffer));
  });
} else if (kind === "sketch") {
  const round = prepareSketch(parseSketchConfig(parseJson(job.config)));
  const width = 2 * round.config.sketch.size;
  const noise = noiseGrid(round.config.sketch, 1);
  job.points.forEach((p, i) => {
    const out = new DataView(new ArrayBuffer(8 * width * job.samples));
    for (let k = 0; k < job.samples; k++) {
      const trace: { noiseless?: number[] } = {};
      const r = encodeSketch(round, [p], rnd, trace);
      if (r.exponent !== noise.exponent) throw new Error(`grid exponent ${r.exponent}, expected ${noise.exponent}`);
      let units = r.units;
      if (job.broken) {
        const lap = discreteLaplace(noise.scaleNum, BigInt(f) * noise.scaleDen, width, rnd);
        units = trace.noiseless!.map((x, j) => BigInt(Math.round(x * 2 ** -noise.exponent)) + lap[j]!);
      }
      units.forEach((u, j) => out.setBigInt64(8 * (width * k + j), u, true));
    }
    writeFileSync(`${job.out}-${i}.bin`, new Uint8Array(out.buffer));
  });
} else {
  throw new Error(`no audit for ${kind} messages`);
}
