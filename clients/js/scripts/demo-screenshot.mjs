// The demo page (demo/) in chromium as a real `shoal server` serves it at /device/ (needs
// the venv and `npm run build`; the pytest twin is tests/server/edge/test_device_page_browser.py):
// a person's steps are played (choose the open round, sample point, take part), and a
// screenshot is written to build/demo.png. Exits 1 unless the page reports the report sent
// and the ledger holds the round.
//   node scripts/demo-screenshot.mjs
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync } from "node:fs";
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
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1000, height: 1200 } });
  await page.goto(`${url}/device/?key=${pin}`);
  await page.click(`#rounds tr[data-id="${created.id}"] button.choose`);
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
