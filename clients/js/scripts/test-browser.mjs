// Runs the bundled test suite (build/test-browser.js) in Debian's chromium through
// playwright-core (no browser download: CHROMIUM or /usr/bin/chromium). The page is
// served from http://localhost/ by request interception, a secure context, so
// WebCrypto and crypto.getRandomValues behave as on a real https page.
import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
let failed = 0;
try {
  const page = await browser.newPage();
  const script = readFileSync(new URL("../build/test-browser.js", import.meta.url), "utf8");
  await page.route("http://localhost/**", (route) => {
    const url = new URL(route.request().url());
    if (url.pathname === "/test.js") return route.fulfill({ contentType: "text/javascript", body: script });
    return route.fulfill({ contentType: "text/html", body: '<!doctype html><meta charset="utf-8"><script src="/test.js"></script>' });
  });
  page.on("pageerror", (e) => { console.error("page error:", e); failed++; });
  await page.goto("http://localhost/");
  const version = browser.version();
  const results = await page.evaluate(() => window.shoalTests());
  const strict = process.env.SHOAL_STRICT === "1";
  let todos = 0;
  for (const r of results) {
    const mark = r.todo ? ` # TODO ${r.todo}` : "";
    console.log(`${r.ok ? "ok" : "not ok"} - [chromium ${version}] ${r.name} (${r.ms.toFixed(0)} ms)${mark}`);
    if (!r.ok && r.todo && !strict) { todos++; continue; }
    if (!r.ok) { failed++; console.log(r.error.split("\n").map((l) => "  # " + l).join("\n")); }
  }
  console.log(`# chromium: ${results.length - failed - todos} of ${results.length} passed, ${failed} failed, ${todos} todo (not implemented)`);
  if (results.length === 0) failed++;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
