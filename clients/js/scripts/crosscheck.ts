// Writes TypeScript-device messages with their intermediates as JSON lines, for
// scripts/crosscheck.py to check with the Python implementation (wire validity,
// pydantic's bytes, the cap of each vector report, the true bucket of each hist report).
//   npx esbuild scripts/crosscheck.ts --bundle --platform=node --format=esm --outfile=build/crosscheck.mjs
//   node build/crosscheck.mjs 300 > build/crosscheck.jsonl
import { reference } from "../test/reference.js";
import { parseJson } from "../src/json.js";
import { parseTreeConfig } from "../src/config.js";
import { encodeTree, messageJson, messagesBinary, prepareTree, type TreeTrace } from "../src/tree.js";
import { OsRandom } from "../src/random.js";

const per = Number(process.argv[2] ?? "300");
const rnd = new OsRandom();
for (const c of reference.tree) {
  const round = prepareTree(parseTreeConfig(parseJson(c.config_text)));
  for (let i = 0; i < per; i++) {
    const d = c.devices[i % c.devices.length]!;
    const trace: Partial<TreeTrace> = {};
    const m = encodeTree(round, d.point, rnd, trace);
    const bin = Array.from(messagesBinary([m]), (b) => b.toString(16).padStart(2, "0")).join("");
    process.stdout.write(JSON.stringify({
      case: c.name, point: d.point, message: messageJson(m), binary: bin,
      root: trace.root, true_bucket: trace.trueBucket ?? null, keep: trace.keep ?? null,
      in_cap: trace.inCap ?? null, u: trace.u ? Array.from(trace.u) : null, sign: trace.sign ?? null,
    }) + "\n");
  }
}
