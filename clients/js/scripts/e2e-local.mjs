// A smoke test against a real server (not part of npm test: it needs the Python venv).
// Starts `shoal server` on 127.0.0.1 with a fresh database and key, opens a local-model
// tree round, has N TypeScript devices (the built dist/shoal-device.js, each with its own
// ledger and OS randomness, the server key pinned) take part, then asks the server to
// cluster and prints what it decoded.
//   npm run build && node scripts/e2e-local.mjs [devices] [encoder]
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Device, Ledger, MemoryLedgerStore } from "../dist/shoal-device.js";

const n = Number(process.argv[2] ?? "400");
const encoder = process.argv[3] ?? "lsh";
const python = process.env.PYTHON ?? new URL("../../../.venv/bin/shoal", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "shoal-js-e2e-"));
const port = 18000 + Math.floor(Math.random() * 1000);
const token = "operator-token-for-the-js-smoke-test";
const server = spawn(python, ["server", "--host", "127.0.0.1", "--port", String(port), "--db", `sqlite:///${dir}/db.sqlite`,
  "--log-level", "warning"], { env: { ...process.env, SHOAL_KEY_PATH: join(dir, "key.pem"), SHOAL_OPERATOR_TOKEN: token,
  SHOAL_SHUFFLER_TOKEN: "shuffler-token-for-the-js-smoke-test" } });
let log = "";
server.stdout.on("data", (d) => (log += d));
server.stderr.on("data", (d) => (log += d));
const url = `http://127.0.0.1:${port}`;
try {
  let pin = null;
  for (let i = 0; i < 200 && pin === null; i++) {
    await new Promise((r) => setTimeout(r, 100));
    pin = /identity (sha256:[0-9a-f]{64})/.exec(log)?.[1] ?? null;
  }
  if (!pin) throw new Error(`the server did not start:\n${log}`);
  for (let i = 0; i < 100; i++) {
    try { if ((await fetch(`${url}/protocol`)).ok) break; } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  const op = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const created = await (await fetch(`${url}/rounds`, { method: "POST", headers: op,
    body: JSON.stringify({ k: 3, dim: 2, epsilon: 4, n_expected: n, encoder, bound: { radius: 10 } }) })).json();
  const roundId = created.id ?? created.round_id;
  if (!roundId) throw new Error(`no round: ${JSON.stringify(created)}`);
  const centers = [[-5, -5], [5, 0], [0, 6]];
  const t0 = performance.now();
  let accepted = 0;
  for (let i = 0; i < n; i++) {
    const c = centers[i % 3];
    const point = c.map((v) => v + (Math.random() - 0.5));
    const device = new Device({ serverUrl: url, ledger: new Ledger(new MemoryLedgerStore(), 10), serverKey: pin });
    const answer = await device.participate(roundId, point);
    accepted += answer?.accepted ?? answer?.stored ?? 1;
  }
  const ms = performance.now() - t0;
  const round = await (await fetch(`${url}/rounds/${roundId}`)).json();
  const result = await (await fetch(`${url}/rounds/${roundId}/cluster`, { method: "POST", headers: op, body: "{}" })).json();
  console.log(JSON.stringify({ round: roundId, encoder, devices: n, ms_per_device: +(ms / n).toFixed(1), reports: round.reports ?? round.n_reports,
    centers: result.centers?.map((c) => c.map((v) => +v.toFixed(2))), sizes: result.sizes ?? result.cluster_sizes }, null, 0));
} finally {
  server.kill("SIGTERM");
}
