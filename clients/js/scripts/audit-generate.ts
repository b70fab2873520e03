// Writes N tree messages per input from the TypeScript device, as binary batches
// (common/binary_wire.py format), for the Python bit-level audit (scripts/audit.py).
// A job on stdin: {"config": <published config JSON text>, "points": [[...], [...]],
// "samples": N, "out": "<prefix>", "broken": false}. "broken": the device's GRR and
// PrivUnit numerators are computed for 3x the epsilon (a deliberately broken
// sampler, which the audit must catch).
import { readFileSync, writeFileSync } from "node:fs";
import { parseJson } from "../src/json.js";
import { parseTreeConfig } from "../src/config.js";
import { encodeTree, messagesBinary, prepareTree, type DeviceMessage } from "../src/tree.js";
import { grrKeepNumerator, privunitNumerator } from "../src/exact.js";
import { OsRandom } from "../src/random.js";

const job = JSON.parse(readFileSync(0, "utf8")) as { config: string; points: number[][]; samples: number; out: string; broken?: boolean };
const round = prepareTree(parseTreeConfig(parseJson(job.config)));
if (job.broken) {
  const c = round.config;
  if (round.keepNumerator !== null) round.keepNumerator = grrKeepNumerator(3 * c.eps_hist, c.hist_buckets);
  if (round.vec) round.vec.capNumerator = privunitNumerator(3 * c.eps_vec, c.vec_candidates, c.vec_cap);
  if (round.root) round.root.capNumerator = privunitNumerator(3 * c.epsilon, c.root_candidates, c.root_cap);
}
const rnd = new OsRandom();
job.points.forEach((p, i) => {
  const ms: DeviceMessage[] = [];
  for (let k = 0; k < job.samples; k++) ms.push(encodeTree(round, p, rnd));
  writeFileSync(`${job.out}-${i}.bin`, messagesBinary(ms));
});
