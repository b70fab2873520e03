// Node-only cases (the file ledger): imported by test/node-entry.ts, not by the browser entry.
import { existsSync, mkdtempSync, readFileSync, writeFileSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, eq, ok } from "./harness.js";
import { Ledger } from "../src/ledger.js";
import { FileLedgerStore } from "../src/node.js";

test("file ledger: two ledgers on one file (two processes) record a round once; the file is the Python ledger's format", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "shoal-ledger-")), "sub", "ledger.json");
  const a = new Ledger(new FileLedgerStore(path), 5);
  const b = new Ledger(new FileLedgerStore(path), 5);
  let built = 0;
  const slow = (m: string) => async () => { built++; await new Promise((r) => setTimeout(r, 20)); return m; };
  const [x, y] = await Promise.all([a.record("r1", { guarantee: "local", epsilon: 2 }, slow("from a")),
    b.record("r1", { guarantee: "local", epsilon: 2 }, slow("from b"))]);
  eq(x, y, "one message for the round");
  eq(built, 1, "built once under the lock");
  const data = JSON.parse(readFileSync(path, "utf8")) as { version: number; cap: number; rounds: Record<string, { message: string; epsilon: number }> };
  eq(data.version, 2, "version");
  eq(data.rounds["r1"]!.message, x, "the recorded message");
  ok(!existsSync(path + ".lock"), "the lock is released");
  let refused = false;
  await b.record("r2", { guarantee: "local", epsilon: 3.5 }, () => "m").catch(() => (refused = true));
  ok(refused, "the cap holds across ledgers sharing the file");
});

test("file ledger: a lock left by a crashed holder is taken over once stale", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "shoal-ledger-")), "ledger.json");
  writeFileSync(path + ".lock", "");
  const old = (Date.now() - 120_000) / 1000;
  utimesSync(path + ".lock", old, old);
  const ledger = new Ledger(new FileLedgerStore(path, 60_000), 5);
  eq(await ledger.record("r", { guarantee: "local", epsilon: 1 }, () => "m"), "m", "recorded");
  ok(!existsSync(path + ".lock"), "released");
});
