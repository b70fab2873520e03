// Per-report encode time of the TypeScript device (Node), on configs given as JSON
// lines on stdin ({"name", "config"}), 200 reports each at d = the config's dim.
//   esbuild scripts/bench.ts --bundle --platform=node --format=esm --outfile=build/bench.mjs
import { readFileSync } from "node:fs";
import { parseJson } from "../src/json.js";
import { parseTreeConfig } from "../src/config.js";
import { encodeTree, prepareTree } from "../src/tree.js";
import { OsRandom } from "../src/random.js";

const input = JSON.parse(readFileSync(0, "utf8")) as Record<string, { config: string; one_ms: number }>;
const rnd = new OsRandom();
for (const [name, v] of Object.entries(input)) {
  const round = prepareTree(parseTreeConfig(parseJson(v.config)));
  const d = round.config.dim;
  const pts = Array.from({ length: 200 }, () => Array.from({ length: d }, () => (Math.random() - 0.5) * 0.2));
  for (let i = 0; i < 20; i++) encodeTree(round, pts[i]!, rnd); // warm the JIT
  const t0 = performance.now();
  for (const p of pts) encodeTree(round, p, rnd);
  const ms = (performance.now() - t0) / pts.length;
  console.log(`${name}: d=${d} TypeScript ${ms.toFixed(2)} ms/report, Python ${v.one_ms.toFixed(2)} ms/report: ratio ${(ms / v.one_ms).toFixed(2)}`);
}
