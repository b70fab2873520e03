// Bundles the test suite twice with esbuild: for Node (node:test) and for chromium
// (Playwright). The conformance vectors (../../protocol/vectors/*.json) are embedded
// as text under "virtual:vectors", so both runners read the very same files and
// parse them with the device's own JSON parser (exact 64-bit integers).
import { build } from "esbuild";
import { existsSync, readdirSync, readFileSync } from "node:fs";

const folder = new URL("../../../protocol/vectors/", import.meta.url);
const vectors = {
  name: "vectors",
  setup(b) {
    b.onResolve({ filter: /^virtual:vectors$/ }, () => ({ path: "vectors", namespace: "vectors" }));
    b.onLoad({ filter: /.*/, namespace: "vectors" }, () => {
      const files = {};
      if (existsSync(folder)) {
        for (const f of readdirSync(folder).filter((n) => n.endsWith(".json")).sort()) {
          files[f] = readFileSync(new URL(f, folder), "utf8");
        }
      }
      return { contents: `export default ${JSON.stringify(files)};`, loader: "js" };
    });
  },
};
const common = { bundle: true, sourcemap: "inline", target: "es2022", logLevel: "warning", plugins: [vectors] };
await build({ ...common, entryPoints: ["test/node-entry.ts"], outfile: "build/test-node.mjs", platform: "node", format: "esm" });
await build({ ...common, entryPoints: ["test/browser-entry.ts"], outfile: "build/test-browser.js", platform: "browser", format: "iife" });
