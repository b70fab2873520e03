// Bundles the test suite twice with esbuild: for Node (node:test) and for chromium (Playwright).
import { build } from "esbuild";

const common = { bundle: true, sourcemap: "inline", target: "es2022", logLevel: "warning" };
await build({ ...common, entryPoints: ["test/node-entry.ts"], outfile: "build/test-node.mjs", platform: "node", format: "esm" });
await build({ ...common, entryPoints: ["test/browser-entry.ts"], outfile: "build/test-browser.js", platform: "browser", format: "iife" });
