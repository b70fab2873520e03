// npm run build: dist/shoal-device.js (ES module, every run-time dependency
// bundled, minified: what a page loads) and dist/node.js (the Node-only file
// ledger). Types come from tsc (tsconfig.build.json) into dist/types/.
import { build } from "esbuild";
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const common = { bundle: true, format: "esm", target: "es2022", minify: true, sourcemap: true, logLevel: "warning", legalComments: "eof" };
await build({ ...common, entryPoints: ["src/index.ts"], outfile: "dist/shoal-device.js", platform: "neutral" });
await build({ ...common, entryPoints: ["src/node.ts"], outfile: "dist/node.js", platform: "node" });
const size = readFileSync("dist/shoal-device.js");
console.log(`dist/shoal-device.js: ${size.length} bytes, ${gzipSync(size, { level: 9 }).length} gzipped`);
