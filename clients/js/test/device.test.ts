import { test, eq, ok, throws } from "./harness.js";
import files from "virtual:vectors";
import { fsum, Ledger, MemoryLedgerStore } from "../src/ledger.js";
import { Device, deviceEpsilon } from "../src/device.js";
import { parseJson, pyFloat, type JsonObject, type JsonValue } from "../src/json.js";
import { parseTreeConfig } from "../src/config.js";
import { fromBase64 } from "../src/encoding.js";

async function rejects(p: Promise<unknown>, pattern: RegExp, msg: string): Promise<void> {
  try {
    await p;
  } catch (e) {
    const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    ok(pattern.test(text), `${msg}: threw ${text}, expected ${pattern}`);
    return;
  }
  throw new Error(`${msg}: did not throw`);
}

test("fsum: exactly rounded sums (Python's math.fsum values)", () => {
  eq(fsum([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]), 1.0, "ten 0.1");
  eq(fsum([1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50]), 1e-100, "cancellation");
  eq(fsum([2.0 ** 53, -0.5, -(2.0 ** -54)]), 2.0 ** 53 - 1.0, "half-even correction");
  eq(fsum([]), 0, "empty");
  eq(fsum([0.3, 0.7, 1.25, 0.75]), 3.0, "simple");
});

test("ledger: once per round, charged when recorded, the cap, fresh devices, no-guarantee rounds", async () => {
  const ledger = new Ledger(new MemoryLedgerStore(), 5.0);
  let built = 0;
  const make = (text: string) => () => { built++; return text; };
  eq(await ledger.record("a", { guarantee: "local", epsilon: 3 }, make("m-a")), "m-a", "first message");
  eq(await ledger.record("a", { guarantee: "local", epsilon: 3 }, make("m-a2")), "m-a", "the recorded message again");
  eq(built, 1, "built once");
  eq(await ledger.spent(), 3, "spent");
  await rejects(ledger.record("b", { guarantee: "local", epsilon: 2.5 }, make("m-b")), /PrivacyError: .*cap 5/, "beyond the cap");
  eq(await ledger.messageFor("b"), null, "a refused round is not recorded");
  eq(await ledger.record("b", { guarantee: "local", epsilon: 2 }, make("m-b")), "m-b", "exactly at the cap");
  eq(await ledger.record("s", { guarantee: "none", epsilon: 0, central_epsilon: 1, delta: 1e-6 }, make("m-s")), "m-s", "no local guarantee: never against the cap");
  eq(await ledger.spent(), 5, "still 5");
  await rejects(ledger.record("c", { guarantee: "none", epsilon: 1 }, make("x")), /PrivacyError/, "none charges nothing");
  eq(await ledger.record("r1", { guarantee: "none", epsilon: 0, family: "p" }, make("m-r1")), "m-r1", "family member");
  await rejects(ledger.record("r2", { guarantee: "none", epsilon: 0, family: "p" }, make("x")), /fresh devices/, "second of a family");
  await rejects(ledger.record("r3", { guarantee: "none", epsilon: 0, family: "a" }, make("x")), /fresh devices/, "the parent was answered");
  const stored = JSON.parse(ledger.store.read() as string) as { version: number; cap: number; rounds: Record<string, unknown> };
  eq(stored.version, 2, "file version");
  eq(Object.keys(stored.rounds).join(","), "a,b,s,r1", "rounds");
});

test("ledger: concurrent records of one round build one message", async () => {
  const ledger = new Ledger(new MemoryLedgerStore(), 10);
  let built = 0;
  const all = await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.record("x", { guarantee: "local", epsilon: 1 },
    async () => { built++; await new Promise((r) => setTimeout(r, 1)); return `m${i}`; })));
  eq(built, 1, "one build");
  ok(all.every((m) => m === all[0]), "one message");
});

const vectorFile = files["tree-local-lsh.json"];

/** A fake server and shuffler answering from one vector case's published body. */
function fakeNet(body: JsonObject, roundId: string, state = "open", privacy: object = {}) {
  const log: { method: string; url: string; body: unknown; type: string | null }[] = [];
  let failures = 2;
  const fetchFn = async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const u = String(url);
    const method = init?.method ?? "GET";
    const type = new Headers(init?.headers).get("content-type");
    log.push({ method, url: u, body: init?.body, type });
    if (u.endsWith(`/rounds/${roundId}`)) return new Response(JSON.stringify({ state, privacy }));
    if (u.endsWith(`/rounds/${roundId}/config`)) return new Response(vectorText(body));
    if (failures-- > 0) return new Response("busy", { status: 503 });
    return new Response(JSON.stringify({ accepted: 1 }), { status: 202 });
  };
  return { log, fetchFn };
}

function vectorText(v: JsonValue): string {
  // the server's JSON as Python writes it (ints as digits, floats as repr)
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") return pyFloat(v);
  if (Array.isArray(v)) return `[${v.map(vectorText).join(",")}]`;
  if (v !== null && typeof v === "object") return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${vectorText(x)}`).join(",")}}`;
  return JSON.stringify(v);
}

test("device: a local tree round end to end against a fake server (pin, state, ledger, binary body, retries resend the same bytes)", async () => {
  ok(vectorFile !== undefined, "the tree-local-lsh vector file");
  const c = ((parseJson(vectorFile!) as JsonObject)["cases"] as JsonObject[])[0]!;
  const pub = (c["outputs"] as JsonObject)["published"] as JsonObject;
  const body = pub["body"] as JsonObject;
  const roundId = (c["inputs"] as JsonObject)["round_id"] as string;
  const net = fakeNet(body, roundId);
  const ledger = new Ledger(new MemoryLedgerStore(), 10);
  const device = new Device({ serverUrl: "http://server.test/", ledger, serverKey: pub["fingerprint"] as string,
    fetch: net.fetchFn as typeof fetch, backoffMs: 1 });
  const point = ((c["inputs"] as JsonObject)["points"] as number[][])[0]!.map(Number);
  const answer = await device.participate(roundId, point);
  eq(JSON.stringify(answer), '{"accepted":1}', "accepted after two 503s");
  const posts = net.log.filter((r) => r.method === "POST");
  eq(posts.length, 3, "three attempts");
  ok(posts.every((p) => p.url === `http://server.test/rounds/${roundId}/reports/binary` && p.type === "application/octet-stream"), "binary posts");
  const bodies = posts.map((p) => Array.from(p.body as Uint8Array).join(","));
  ok(bodies.every((b) => b === bodies[0]), "every retry sends the same bytes");
  eq((posts[0]!.body as Uint8Array).length, 43, "one 38-byte record behind the 5-byte header");
  const config = parseTreeConfig(body["config"]!);
  eq(await ledger.spent(), deviceEpsilon(config), "charged the round's device epsilon");
  // Again: the recorded message, no new encoding, no config fetch.
  const before = net.log.length;
  await device.participate(roundId, point);
  ok(net.log.slice(before).every((r) => r.method === "POST"), "a second participation only resends");
  eq(Array.from(net.log[net.log.length - 1]!.body as Uint8Array).join(","), bodies[0], "the same bytes again");
});

test("device: refuses a config signed by another key, a closed round, and charges nothing", async () => {
  const c = ((parseJson(vectorFile!) as JsonObject)["cases"] as JsonObject[])[1]!;
  const pub = (c["outputs"] as JsonObject)["published"] as JsonObject;
  const body = pub["body"] as JsonObject;
  const roundId = (c["inputs"] as JsonObject)["round_id"] as string;
  const point = ((c["inputs"] as JsonObject)["points"] as number[][])[0]!.map(Number);
  const ledger = new Ledger(new MemoryLedgerStore(), 10);
  const wrong = new Device({ serverUrl: "http://s.test", ledger, serverKey: "sha256:" + "ab".repeat(32),
    fetch: fakeNet(body, roundId).fetchFn as typeof fetch });
  await rejects(wrong.participate(roundId, point), /TrustError: .*not the pinned server key/, "wrong pin");
  const closed = new Device({ serverUrl: "http://s.test", ledger, serverKey: pub["fingerprint"] as string,
    fetch: fakeNet(body, roundId, "done").fetchFn as typeof fetch });
  await rejects(closed.participate(roundId, point), /TransportError: .*not open/, "closed round");
  const right = new Device({ serverUrl: "http://s.test", ledger, serverKey: pub["fingerprint"] as string,
    fetch: fakeNet(body, roundId).fetchFn as typeof fetch, backoffMs: 1 });
  await rejects(right.participate(roundId, [1, 2]), /ReportError: .*dimension/, "wrong dimension");
  eq(await ledger.spent(), 0, "nothing charged");
  throws(() => new Device({ serverUrl: "x", ledger, serverKey: "sha256:xyz" }), /TrustError/, "a malformed pin");
  ok(fromBase64(body["server_public_key"] as string).length === 32, "X25519 key");
});

test("device: a local refine round (JSON report, fresh-devices family rule) against a fake server", async () => {
  const text = files["local_refine-local-privunit.json"];
  ok(text !== undefined, "the local_refine vector file");
  const cs = (parseJson(text!) as JsonObject)["cases"] as JsonObject[];
  const ledger = new Ledger(new MemoryLedgerStore(), 10);
  const run = async (c: JsonObject) => {
    const pub = (c["outputs"] as JsonObject)["published"] as JsonObject;
    const roundId = (c["inputs"] as JsonObject)["round_id"] as string;
    const net = fakeNet(pub["body"] as JsonObject, roundId);
    const device = new Device({ serverUrl: "http://s.test", ledger, serverKey: pub["fingerprint"] as string,
      fetch: net.fetchFn as typeof fetch, backoffMs: 1 });
    const point = ((c["inputs"] as JsonObject)["points"] as number[][])[0]!.map(Number);
    await device.participate(roundId, point);
    return net.log.filter((r) => r.method === "POST");
  };
  const posts = await run(cs[0]!);
  ok(posts.length > 0 && posts.every((p) => p.url.endsWith("/reports") && p.type === "application/json"), "JSON posts to /reports");
  const sent = JSON.parse(posts[0]!.body as string) as Record<string, unknown>;
  eq(Object.keys(sent).join(","), "round_id,message_id,protocol,nonce,index", "a CodebookMessage");
  const cfg = ((cs[0]!["inputs"] as JsonObject)["config"] as JsonObject);
  eq(await ledger.spent(), Number((cfg["privunit"] as JsonObject)["epsilon"]), "charged privunit.epsilon");
  // Every case shares the parent "parent": a second local refine round of that family is refused.
  await rejects(run(cs[1]!), /PrivacyError: .*fresh devices/, "a second round of the same family");
});

test("device: a local sketch round of several records (binary body, charged n0 eps) against a fake server", async () => {
  const text = files["sketch-local-sketch.json"];
  ok(text !== undefined, "the sketch vector file");
  const c = ((parseJson(text!) as JsonObject)["cases"] as JsonObject[]).find((x) => ((x["inputs"] as JsonObject)["points"] as unknown[]).length > 1)!;
  const pub = (c["outputs"] as JsonObject)["published"] as JsonObject;
  const roundId = (c["inputs"] as JsonObject)["round_id"] as string;
  const net = fakeNet(pub["body"] as JsonObject, roundId);
  const ledger = new Ledger(new MemoryLedgerStore(), 100);
  const device = new Device({ serverUrl: "http://s.test", ledger, serverKey: pub["fingerprint"] as string,
    fetch: net.fetchFn as typeof fetch, backoffMs: 1 });
  const records = ((c["inputs"] as JsonObject)["points"] as number[][]).map((p) => p.map(Number));
  await device.participate(roundId, records);
  const posts = net.log.filter((r) => r.method === "POST");
  ok(posts.every((p) => p.url.endsWith("/reports/binary")), "binary posts");
  const body = posts[0]!.body as Uint8Array;
  eq(String.fromCharCode(body[0]!, body[1]!, body[2]!), "SHS", "a binary sketch");
  const eps = Number((((c["inputs"] as JsonObject)["config"] as JsonObject)["sketch"] as JsonObject)["epsilon"]);
  eq(await ledger.spent(), records.length * eps, "n0 x eps");
});

test("device: a secure-sum (refine) round needs consent, a pin and a shuffler; it posts sealed parts and charges nothing", async () => {
  const text = files["refine-shuffle-secure-sum.json"];
  ok(text !== undefined, "the refine vector file");
  const c = ((parseJson(text!) as JsonObject)["cases"] as JsonObject[])[0]!;
  const pub = (c["outputs"] as JsonObject)["published"] as JsonObject;
  const roundId = (c["inputs"] as JsonObject)["round_id"] as string;
  const point = ((c["inputs"] as JsonObject)["points"] as number[][])[0]!.map(Number);
  const ledger = new Ledger(new MemoryLedgerStore(), 10);
  const make = (extra: object) => {
    const net = fakeNet(pub["body"] as JsonObject, roundId);
    return { net, device: new Device({ serverUrl: "http://s.test", ledger, serverKey: pub["fingerprint"] as string,
      fetch: net.fetchFn as typeof fetch, backoffMs: 1, shufflerUrl: "http://shuffler.test", deviceToken: "t".repeat(64), ...extra }) };
  };
  await rejects(make({}).device.participate(roundId, point), /PrivacyError: .*no local DP guarantee/, "without consent");
  const { net, device } = make({ allowNoLocalGuarantee: true });
  await device.participate(roundId, point);
  const posts = net.log.filter((r) => r.method === "POST");
  ok(posts.length > 0 && posts.every((p) => p.url === `http://shuffler.test/rounds/${roundId}/messages`), "to the shuffler");
  const body = JSON.parse(posts[0]!.body as string) as { parts: string[]; config_digest: string };
  eq(body.parts.length, Number((((c["inputs"] as JsonObject)["config"] as JsonObject)["secure_sum"] as JsonObject)["shares"]), "s sealed parts");
  eq(body.config_digest, pub["config_digest"], "the verified config's digest");
  eq(await ledger.spent(), 0, "no local eps charged");
  eq((await ledger.entries())[roundId]!.guarantee, "none", "recorded as no local guarantee");
});

test("device: a continual round inserts now and withdraws later (sealed, through the shuffler, statement's eps in the ledger)", async () => {
  const text = files["continual-curator-stream.json"];
  ok(text !== undefined, "the continual vector file");
  const c = ((parseJson(text!) as JsonObject)["cases"] as JsonObject[])[0]!;
  const pub = (c["outputs"] as JsonObject)["published"] as JsonObject;
  const roundId = (c["inputs"] as JsonObject)["round_id"] as string;
  const point = ((c["inputs"] as JsonObject)["points"] as number[][])[0]!.map(Number);
  const ledger = new Ledger(new MemoryLedgerStore(), 10);
  const net = fakeNet(pub["body"] as JsonObject, roundId, "open", { model: "central", epsilon: 2.0 });
  const device = new Device({ serverUrl: "http://s.test", ledger, serverKey: pub["fingerprint"] as string, fetch: net.fetchFn as typeof fetch,
    backoffMs: 1, shufflerUrl: "http://shuffler.test", deviceToken: "t".repeat(64), allowNoLocalGuarantee: true });
  await rejects(device.withdraw(roundId), /TransportError: .*nothing it can withdraw/, "nothing to withdraw yet");
  await device.participate(roundId, point);
  const inserted = net.log.filter((r) => r.method === "POST").map((r) => r.body as string);
  await device.withdraw(roundId);
  const all = net.log.filter((r) => r.method === "POST").map((r) => r.body as string);
  const withdrawal = all[all.length - 1]!;
  ok(inserted.every((b) => b.startsWith('{"sealed"')) && withdrawal.startsWith('{"sealed"'), "sealed submissions");
  ok(withdrawal !== inserted[0], "the withdrawal is another sealed message");
  eq(await ledger.withdrawalFor(roundId), withdrawal, "the recorded withdrawal was sent");
  const entry = (await ledger.entries())[roundId]!;
  eq(entry.guarantee, "none", "no local guarantee");
  eq(entry.central_epsilon, 2.0, "the statement's epsilon");
});

test("device: a central round takes up to records_per_device records, sealed in one message, with group privacy in the ledger", async () => {
  const text = files["central-curator-points.json"];
  ok(text !== undefined, "the central vector file");
  const c = ((parseJson(text!) as JsonObject)["cases"] as JsonObject[]).find((x) => ((x["inputs"] as JsonObject)["points"] as unknown[]).length === 2)!;
  const pub = (c["outputs"] as JsonObject)["published"] as JsonObject;
  const roundId = (c["inputs"] as JsonObject)["round_id"] as string;
  const records = ((c["inputs"] as JsonObject)["points"] as number[][]).map((p) => p.map(Number));
  const ledger = new Ledger(new MemoryLedgerStore(), 10);
  const net = fakeNet(pub["body"] as JsonObject, roundId, "open", { model: "central", epsilon: 1.0, delta: 1e-6 });
  const device = new Device({ serverUrl: "http://s.test", ledger, serverKey: pub["fingerprint"] as string, fetch: net.fetchFn as typeof fetch,
    backoffMs: 1, shufflerUrl: "http://shuffler.test", deviceToken: "t".repeat(64), allowNoLocalGuarantee: true });
  await device.participate(roundId, records);
  const entry = (await ledger.entries())[roundId]!;
  eq(entry.central_epsilon, 2.0, "2 records: 2 eps");
  ok(Math.abs(entry.delta! - 2 * Math.exp(1) * 1e-6) < 1e-18, "2 e^eps delta");
  ok(net.log.some((r) => r.method === "POST" && (r.body as string).startsWith('{"sealed"')), "one sealed submission");
});
