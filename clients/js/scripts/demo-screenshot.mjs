// The demo page (demo/) in chromium against a real `shoal server` (needs the venv and
// `npm run build`): the page is served at /device/ (what the server should serve, issue 40
// item 5), a person's steps are played (sample point, take part), and a screenshot is
// written to build/demo.png. Exits 1 unless the page reports the report sent and the
// ledger holds the round.
//   node scripts/demo-screenshot.mjs
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const root = new URL("../../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "shoal-js-demo-"));
const port = 20000 + Math.floor(Math.random() * 1000);
const token = "operator-token-js-demo-screenshot";
let log = "";
const server = spawn(process.env.SHOAL ?? join(root, ".venv/bin/shoal"), ["server", "--host", "127.0.0.1", "--port", String(port),
  "--db", `sqlite:///${dir}/db.sqlite`, "--log-level", "warning"], { env: { ...process.env, SHOAL_KEY_PATH: join(dir, "key.pem"),
  SHOAL_OPERATOR_TOKEN: token, SHOAL_SHUFFLER_TOKEN: "shuffler-token-js-demo-screenshot" } });
server.stdout.on("data", (d) => (log += d));
server.stderr.on("data", (d) => (log += d));
const url = `http://127.0.0.1:${port}`;
let browser;
try {
  for (let i = 0; i < 300; i++) {
    try { if ((await fetch(`${url}/protocol`)).ok) break; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  const pin = /identity (sha256:[0-9a-f]{64})/.exec(log)?.[1];
  const created = await (await fetch(`${url}/rounds`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ k: 3, dim: 2, epsilon: 4, n_expected: 1000, encoder: "nettree", bound: { radius: 10 } }) })).json();
  const files = {
    "/device/": ["text/html", readFileSync(new URL("../demo/index.html", import.meta.url))],
    "/device/demo.js": ["text/javascript", readFileSync(new URL("../demo/demo.js", import.meta.url))],
    "/device/shoal-device.js": ["text/javascript", readFileSync(new URL("../dist/shoal-device.js", import.meta.url))],
  };
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1000, height: 1100 } });
  await page.route("http://localhost/**", async (route) => {
    const u = new URL(route.request().url());
    const f = files[u.pathname];
    if (f) return route.fulfill({ contentType: f[0], body: f[1] });
    return route.fulfill({ response: await route.fetch({ url: url + u.pathname + u.search }) });
  });
  await page.goto(`http://localhost/device/?key=${pin}&round=${created.id}&rounds=${created.id}`);
  await page.click("#sample");
  await page.waitForFunction(() => document.getElementById("point").value.includes(","));
  await page.click("#go");
  await page.waitForFunction(() => /sent|Error/.test(document.getElementById("status").textContent), null, { timeout: 30000 });
  const status = await page.textContent("#status");
  const ledgerText = await page.textContent("#ledger");
  mkdirSync(new URL("../build/", import.meta.url), { recursive: true });
  await page.screenshot({ path: new URL("../build/demo.png", import.meta.url).pathname, fullPage: true });
  const stored = (await (await fetch(`${url}/rounds/${created.id}`)).json()).reports;
  console.log(JSON.stringify({ status, ledger: ledgerText, reports_at_server: stored, screenshot: "build/demo.png" }));
  if (status !== "sent" || !ledgerText.includes(created.id) || stored !== 1) process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  server.kill("SIGTERM");
}
