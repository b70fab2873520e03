// A real round from real browsers (issue 40, item 3; needs the repo's Python venv and
// `npm run build`): starts `shoal server` and `shoal shuffler` on 127.0.0.1, opens a
// page in Debian's chromium that loads dist/shoal-device.js from an origin of its own
// (both services allow it by SHOAL_DEVICE_ORIGINS: the devices' calls are real CORS
// requests, as from a product's web page), and has it act as N devices
// (each its own Device, ledger and OS randomness; sealed messages each with a fresh
// ephemeral key) in a local-model and a shuffle-model tree round; the server decodes
// both. Prints, per model, the decoded objective against the planted centers' and the
// per-report encode time in chromium at d = 100 against the Python device's, measured
// in the same run.
//   node scripts/browser-round.mjs [devices per model] [first seed] [--seeds=1] [--python] [--check]
//        [--local-eps=8] [--shuffle-eps=8] [--python-again] [--redecodes=0]
// --seeds=S: S seeds (first seed, first seed + 1, ...) on one server, shuffler and browser; each seed
// draws its own points and its rounds' public seed.
// With --python: every round also from Python devices (scripts/python_devices.py: same parameters, same
// points, a fresh round with the same public seed, so the two populations differ only in their devices'
// private randomness), and per model the ratio of the decoded objectives' means over the seeds
// (browser / Python). --python-again adds a second Python population (the spread of Python against Python).
// --check (with --python): exit 1 unless, per model, every report arrived, the ratio of the means is within
// 30% of 1 and the chromium encode time is <= 3x Python's; tests/clients/js runs it. Why 30% (issue 40's
// "within noise", tests/bench/results/browser_round_spread.md): two populations of the same Python device,
// 400 rounds per seed and model, left 10% about one run in ten (CI failed on it) and 30% at most ~2e-5 of
// pairs per model; devices keeping the histogram's bucket at eps 4 while the round says 8 are always caught.
// --redecodes=R: each round's reports decoded R more times (`{"again": true}`, post-processing), their
// objectives printed: the part of the spread that is the server's clustering, not the devices.
// Why eps 8 by default: the comparison is of two implementations of one law, and its power to see a
// device that is off grows with the signal; at 1,000 devices and eps 1-4 a round's objective is decided
// by noise (Python against Python 0.75-3.96 over single seeds, clients/js/README.md).
import { spawn, execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer } from "node:http";
import { join } from "node:path";
import { chromium } from "playwright-core";

const positional = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const n = Number(positional[0] ?? "1000");
const firstSeed = Number(positional[1] ?? "1");
const withPython = process.argv.includes("--python");
const check = process.argv.includes("--check");
const BAND = 0.3; // --check's band on the ratio of the means (see above)
const flag = (name, fallback) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const seeds = Array.from({ length: flag("seeds", 1) }, (_, i) => firstSeed + i);
const localEps = flag("local-eps", 8);
const shuffleEps = flag("shuffle-eps", 8);
const redecodes = flag("redecodes", 0);
const pythonAgain = process.argv.includes("--python-again");
const root = new URL("../../../", import.meta.url).pathname;
const shoal = process.env.SHOAL ?? join(root, ".venv/bin/shoal");
const python = process.env.PYTHON ?? join(root, ".venv/bin/python");
const dir = mkdtempSync(join(tmpdir(), "shoal-js-round-"));
const base = 18000 + Math.floor(Math.random() * 2000);
const [serverPort, shufflerPort, pagePort] = [base, base + 1, base + 2];
const pageUrl = `http://127.0.0.1:${pagePort}/`;
const env = { ...process.env, SHOAL_DEVICE_ORIGINS: pageUrl.slice(0, -1), SHOAL_KEY_PATH: join(dir, "key.pem"), SHOAL_OPERATOR_TOKEN: "operator-token-js-browser-round",
  SHOAL_SHUFFLER_TOKEN: "shuffler-token-js-browser-round", SHOAL_ENROL_TOKEN: "enrol-token-js-browser-round" };
const procs = [];
const logs = { server: "", shuffler: "" };
const start = (name, args) => {
  const p = spawn(shoal, args, { env });
  p.stdout.on("data", (d) => (logs[name] += d));
  p.stderr.on("data", (d) => (logs[name] += d));
  procs.push(p);
  return p;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fetchRaw = globalThis.fetch;
const fetch = async (url, init) => {
  for (let i = 0; ; i++) {
    try { return await fetchRaw(url, init); } catch (e) { if (i >= 3) throw e; await sleep(200); }
  }
};
const up = async (url) => {
  for (let i = 0; i < 300; i++) {
    try { if ((await fetch(url)).ok) return; } catch { /* not yet */ }
    await sleep(100);
  }
  throw new Error(`${url} did not come up:\n${JSON.stringify(logs)}`);
};

// Planted mixture: k = 3 well-separated Gaussian clusters in d = 2, radius bound 10; its own points per seed.
const centers = [[-5, -5], [5, 0], [0, 6]];
const mixture = (seed) => {
  let s = seed >>> 0;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  return Array.from({ length: n }, (_, i) => centers[i % 3].map((c) => c + 0.8 * gauss()));
};
const objectiveOf = (points, cs) =>
  points.reduce((acc, p) => acc + Math.min(...cs.map((c) => (p[0] - c[0]) ** 2 + (p[1] - c[1]) ** 2)), 0) / points.length;
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

let browser;
let pageServer;
try {
  // The devices' web page: a blank page and the built bundle, from 127.0.0.1 only.
  const bundle = readFileSync(new URL("../dist/shoal-device.js", import.meta.url), "utf8");
  pageServer = createServer((req, res) => {
    if (req.url === "/shoal-device.js") res.writeHead(200, { "content-type": "text/javascript" }).end(bundle);
    else res.writeHead(200, { "content-type": "text/html" }).end('<!doctype html><meta charset="utf-8"><title>shoal devices</title>');
  });
  await new Promise((resolve, reject) => pageServer.once("error", reject).listen(pagePort, "127.0.0.1", resolve));
  start("server", ["server", "--host", "127.0.0.1", "--port", String(serverPort), "--db", `sqlite:///${dir}/server.db`, "--log-level", "warning"]);
  const serverUrl = `http://127.0.0.1:${serverPort}`;
  await up(`${serverUrl}/protocol`);
  const pin = /identity (sha256:[0-9a-f]{64})/.exec(logs.server)?.[1];
  if (!pin) throw new Error(`no server identity printed:\n${logs.server}`);
  // The shuffler holds up to min_batch - 1 messages back (no smaller batch is ever released): a tenth of the
  // devices keeps that loss small; at eps 8 the devices' eps0 is 8 either way (a batch can only help).
  const minBatch = Math.max(2, Math.floor(n / 10));
  start("shuffler", ["shuffler", "--server-url", serverUrl, "--server-key", pin, "--min-batch", String(minBatch), "--host", "127.0.0.1",
    "--port", String(shufflerPort), "--db", join(dir, "shuffler.db"), "--log-level", "warning"]);
  const shufflerUrl = `http://127.0.0.1:${shufflerPort}`;
  await up(`${shufflerUrl}/healthz`);

  const op = { authorization: `Bearer ${env.SHOAL_OPERATOR_TOKEN}`, "content-type": "application/json" };
  const create = async (body) => {
    const r = await fetch(`${serverUrl}/rounds`, { method: "POST", headers: op, body: JSON.stringify(body) });
    const j = await r.json();
    if (!r.ok) throw new Error(`POST /rounds ${r.status}: ${JSON.stringify(j)}`);
    return j;
  };
  // Every round of a model (browser, Python) takes the same public seed: the populations differ only in
  // their devices' private randomness, so their ratio measures the devices, not two draws of the round's
  // public objects.
  const specs = (seed) => ({
    local: { k: 3, dim: 2, epsilon: localEps, n_expected: n, encoder: "nettree", bound: { radius: 10 }, tuning: { seed: 2 * seed } },
    shuffle: { k: 3, dim: 2, epsilon: shuffleEps, delta: 1e-6, min_batch: minBatch, model: "shuffle", n_expected: n,
      encoder: "nettree", bound: { radius: 10 }, tuning: { seed: 2 * seed + 1 } },
  });
  const wide = await create({ k: 10, dim: 100, epsilon: 4, n_expected: 100000, encoder: "lsh", bound: { radius: 1 } });
  const enrol = async () => {
    const enrolled = await (await fetch(`${shufflerUrl}/enrol`, { method: "POST", headers: { authorization: `Bearer ${env.SHOAL_ENROL_TOKEN}`,
      "content-type": "application/json" }, body: JSON.stringify({ count: n }) })).json();
    if (!enrolled.tokens || enrolled.tokens.length !== n) throw new Error(`enrolment: ${JSON.stringify(enrolled).slice(0, 200)}`);
    return enrolled.tokens;
  };

  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
  // The page comes from its own origin (a static server here, as a product's web page would), and its devices
  // call the server and the shuffler directly, across origins: both list the page's origin in
  // SHOAL_DEVICE_ORIGINS (common/services/device_cors.py), so the real CORS path is what runs. (An earlier
  // version proxied every request through Playwright's route handler: ~20 ms a device, most of this run.)
  const page = await browser.newPage();
  await page.goto(pageUrl);

  const run = async (roundId, withShuffler, points, tokens) => page.evaluate(async ({ roundId, pin, points, tokens, withShuffler, serverUrl, shufflerUrl }) => {
    const m = await import("/shoal-device.js");
    const t0 = performance.now();
    let next = 0;
    const answers = [];
    const worker = async () => {
      for (let i = next++; i < points.length; i = next++) {
        const device = new m.Device({ serverUrl, serverKey: pin, ledger: new m.Ledger(new m.MemoryLedgerStore(), 10),
          ...(withShuffler ? { shufflerUrl, deviceToken: tokens[i] } : {}) });
        answers.push(await device.participate(roundId, points[i]));
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    return { ms: performance.now() - t0, answers: answers.length };
  }, { roundId, pin, points, tokens, withShuffler, serverUrl, shufflerUrl });

  const out = { devices_per_model: n, seeds, local_eps: localEps, shuffle_eps: shuffleEps, rounds: [] };
  const decode = async (round, shuffle, objective) => {
    // The shuffler releases batches of at least min_batch: up to min_batch - 1 messages stay held.
    const expected = shuffle ? n - (minBatch - 1) : n;
    for (let i = 0; shuffle && i < 150; i++) {
      if ((await (await fetch(`${serverUrl}/rounds/${round.id}`)).json()).reports >= expected) break;
      await sleep(200);
    }
    const st = await (await fetch(`${serverUrl}/rounds/${round.id}`)).json();
    const res = await (await fetch(`${serverUrl}/rounds/${round.id}/cluster`, { method: "POST", headers: op, body: "{}" })).json();
    // The same reports decoded anew (post-processing: the server's clustering of the private coreset has its
    // own randomness): how much of an objective's spread is the decode's, not the devices'.
    const redecoded = [];
    for (let i = 0; i < redecodes; i++) {
      const again = await (await fetch(`${serverUrl}/rounds/${round.id}/cluster`, { method: "POST", headers: op,
        body: JSON.stringify({ again: true }) })).json();
      if (again.centers) redecoded.push(+objective(again.centers).toFixed(4));
    }
    return { expected, reports: st.reports, centers: res.centers ?? [], redecoded };
  };
  const python_ = async (round, shuffle, points, objective) => {
    const job = { server: serverUrl, shuffler: shuffle ? shufflerUrl : null, pin, round: round.id, points,
      tokens: shuffle ? await enrol() : null };
    const child = promisify(execFile)(python, [join(root, "clients/js/scripts/python_devices.py")], { maxBuffer: 1 << 24 });
    child.child.stdin.end(JSON.stringify(job));
    await child;
    return decode(round, shuffle, objective);
  };
  const rounded = (cs) => cs.map((c) => c.map((v) => +v.toFixed(2)));
  for (const seed of seeds) {
    const points = mixture(seed);
    const objective = (cs) => objectiveOf(points, cs);
    const spec = specs(seed);
    for (const [name, shuffle] of [["local", false], ["shuffle", true]]) {
      const round = await create(spec[name]);
      const tokens = shuffle ? await enrol() : [];
      const r = await run(round.id, shuffle, points, tokens);
      const d = await decode(round, shuffle, objective);
      const row = { seed, model: name, devices: n, expected_at_least: d.expected, browser_ms_per_device: +(r.ms / n).toFixed(2),
        reports_at_server: d.reports, objective: +objective(d.centers).toFixed(4), planted_objective: +objective(centers).toFixed(4),
        centers: rounded(d.centers), ...(redecodes ? { redecoded: d.redecoded } : {}) };
      if (withPython) {
        // Python devices on the same points, in a fresh round with the same public seed (each device its own
        // OS randomness); with --python-again a second such population: the spread of Python against Python.
        const t = performance.now();
        const p = await python_(await create(spec[name]), shuffle, points, objective);
        row.python_seconds = +((performance.now() - t) / 1000).toFixed(1);
        row.python = { reports_at_server: p.reports, objective: +objective(p.centers).toFixed(4), centers: rounded(p.centers),
          ...(redecodes ? { redecoded: p.redecoded } : {}) };
        row.python_expected_at_least = p.expected;
        row.objective_ratio_browser_over_python = +(objective(d.centers) / objective(p.centers)).toFixed(3);
        if (pythonAgain) {
          const q = await python_(await create(spec[name]), shuffle, points, objective);
          row.python_again = { reports_at_server: q.reports, objective: +objective(q.centers).toFixed(4), centers: rounded(q.centers),
            ...(redecodes ? { redecoded: q.redecoded } : {}) };
          row.objective_ratio_python_again_over_python = +(objective(q.centers) / objective(p.centers)).toFixed(3);
        }
      }
      out.rounds.push(row);
      console.error(`seed ${seed} ${name}: browser ${row.objective}${withPython ? ` python ${row.python.objective}` : ""} ` +
        `(planted ${row.planted_objective}; ${row.reports_at_server} reports)`);
    }
  }
  for (const name of ["local", "shuffle"]) {
    const rows = out.rounds.filter((r) => r.model === name);
    out[name] = { browser_mean: +mean(rows.map((r) => r.objective)).toFixed(4) };
    if (withPython) {
      out[name].python_mean = +mean(rows.map((r) => r.python.objective)).toFixed(4);
      out[name].ratio_of_means_browser_over_python = +(out[name].browser_mean / out[name].python_mean).toFixed(3);
    }
  }

  // Encode time per report at d = 100 in chromium, against the Python device on the same config: each the
  // fastest of 5 blocks of 50 reports after 20 to warm up (a loaded machine slows blocks, never speeds them).
  const cfgText = await (await fetch(`${serverUrl}/rounds/${wide.id}/config`)).text();
  const chromiumMs = await page.evaluate(async (cfgText) => {
    const m = await import("/shoal-device.js");
    const body = m.parseJson(cfgText);
    const round = m.prepareTree(m.parseTreeConfig(body.config));
    const rnd = new m.OsRandom();
    const pts = Array.from({ length: 120 }, () => Array.from({ length: 100 }, () => (Math.random() - 0.5) * 0.2));
    for (let i = 0; i < 20; i++) m.encodeTree(round, pts[i], rnd);
    let best = Infinity;
    for (let b = 0; b < 5; b++) {
      const t0 = performance.now();
      for (const p of pts.slice(20 + 20 * b, 70 + 20 * b)) m.encodeTree(round, p, rnd);
      best = Math.min(best, (performance.now() - t0) / 50);
    }
    return best;
  }, cfgText);
  const pyMs = Number(execFileSync(python, ["-c", `
import json, sys, time, numpy as np
from shoal.common.kinds import parse_config
from shoal.client.encoder import encode
config = parse_config(json.loads(sys.stdin.read())["config"])
pts = np.random.default_rng(0).normal(size=(120, 100)) * 0.1
for p in pts[:20]: encode(p, config)
best = float("inf")
for b in range(5):
    t = time.perf_counter()
    for p in pts[20 + 20 * b:70 + 20 * b]: encode(p, config)
    best = min(best, (time.perf_counter() - t) / 50)
print(best * 1e3)`], { input: cfgText }).toString().trim());
  out.encode_d100 = { chromium_ms_per_report: +chromiumMs.toFixed(2), python_ms_per_report: +pyMs.toFixed(2), ratio: +(chromiumMs / pyMs).toFixed(2) };
  out.chromium = browser.version();
  console.log(JSON.stringify(out, null, 1));
  const failures = [];
  for (const r of out.rounds) {
    if (!(r.reports_at_server >= r.expected_at_least && r.reports_at_server <= n)) {
      failures.push(`seed ${r.seed} ${r.model}: the server holds ${r.reports_at_server} browser reports, expected ${r.expected_at_least}-${n}`);
    }
    if (r.python && !(r.python.reports_at_server >= r.python_expected_at_least && r.python.reports_at_server <= n)) {
      failures.push(`seed ${r.seed} ${r.model}: the server holds ${r.python.reports_at_server} Python reports, expected ${r.python_expected_at_least}-${n}`);
    }
  }
  if (check) {
    if (!withPython) failures.push("--check needs --python");
    for (const name of ["local", "shuffle"]) {
      const ratio = out[name].ratio_of_means_browser_over_python;
      if (withPython && !(Math.abs(ratio - 1) <= BAND)) {
        failures.push(`${name}: mean objective over seeds ${seeds.join(", ")}: browser ${out[name].browser_mean}, Python ${out[name].python_mean}, ratio ${ratio} (allowed ${1 - BAND}-${1 + BAND})`);
      }
    }
    if (!(out.encode_d100.ratio <= 3)) failures.push(`encoding at d = 100: chromium ${out.encode_d100.chromium_ms_per_report} ms, Python ${out.encode_d100.python_ms_per_report} ms, ratio ${out.encode_d100.ratio} > 3`);
  }
  if (failures.length) {
    process.exitCode = 1;
    console.error(`browser round FAILED:\n${failures.join("\n")}`);
  }
} finally {
  if (browser) await browser.close();
  if (pageServer) pageServer.close();
  for (const p of procs) p.kill("SIGTERM");
}
