// The demo page's logic (plain JS: it loads the built bundle as is). `shoal server` serves it
// at /device/ (server/edge/routers/device_page.py) with a CSP that allows this origin only:
// no inline script or style, fetches to this server alone. Query parameters prefill the form:
// ?key=sha256:...&round=<id>; ?server=<url> points it at another server (only where the page
// is not served under that CSP, e.g. from a file during development).
import { Device, Ledger, LocalStorageLedgerStore } from "./shoal-device.js";

const $ = (id) => document.getElementById(id);
const q = new URLSearchParams(location.search);
const api = (q.get("server") ?? location.origin).replace(/\/+$/, "");
const ledger = new Ledger(new LocalStorageLedgerStore("shoal-demo-ledger"), 10);
const JOINABLE = new Set(["tree", "local_refine", "sketch"]); // what this page can join: local-model rounds of these kinds
const rounds = new Map(); // id -> the public fields GET /rounds/open gave

$("key").value = q.get("key") ?? localStorage.getItem("shoal-demo-key") ?? "";
$("round").value = q.get("round") ?? "";

function say(text, cls) {
  const span = document.createElement("span");
  span.className = cls;
  span.textContent = text;
  $("status").replaceChildren(span);
}

const fmt = (x) => (x === undefined || x === null ? "" : Number(x).toPrecision(4).replace(/\.?0+$/, ""));
const boundText = (b) => (b.low && b.high ? `box [${b.low.map(fmt)}] to [${b.high.map(fmt)}]` : `ball of radius ${fmt(b.radius)}`);
const epsText = (r) => r.model === "local" ? `${fmt(r.epsilon)} (local)`
  : `${fmt(r.epsilon)} central` + (r.delta ? `, delta ${r.delta}` : "") + (r.device_epsilon ? `; eps0 ${fmt(r.device_epsilon)}` : "");
const why = (r) => r.model !== "local" ? `a ${r.model}-model round: it needs a shuffler and an enrolled device (an app), not this page`
  : !JOINABLE.has(r.kind) ? `this page does not join ${r.kind} rounds` : "";

function choose(id) {
  $("round").value = id;
  for (const tr of $("rounds").tBodies[0].rows) tr.classList.toggle("chosen", tr.dataset.id === id);
}

async function showKey() {
  try {
    const r = await fetch(`${api}/server-key`);
    $("claimed").textContent = r.ok ? (await r.json()).fingerprint : `unavailable (${r.status})`;
  } catch (e) { $("claimed").textContent = `unavailable (${e.message})`; }
}

async function showRounds() {
  const body = $("rounds").tBodies[0];
  try {
    const r = await fetch(`${api}/rounds/open`);
    if (!r.ok) throw new Error(`GET /rounds/open: ${r.status} ${await r.text()}`);
    const listed = await r.json();
    body.replaceChildren();
    for (const round of listed.rounds) {
      rounds.set(round.id, round);
      const tr = body.insertRow();
      tr.dataset.id = round.id;
      for (const text of [round.id, round.kind, round.model, String(round.dim), boundText(round.bound), epsText(round)]) {
        tr.insertCell().textContent = text;
      }
      const cell = tr.insertCell();
      const reason = why(round);
      if (reason) cell.textContent = "—", cell.title = reason;
      else {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = "choose";
        b.className = "choose";
        b.onclick = () => choose(round.id);
        cell.append(b);
      }
    }
    $("rounds-note").textContent = listed.rounds.length === 0 ? "No round is open now."
      : `${listed.rounds.length} open round(s)${listed.more ? " (the newest; more are open)" : ""}. ` +
        "This page joins local-model rounds (the report is randomised here and sent to this server); " +
        "shuffle- and central-model rounds need a shuffler and an enrolled device.";
    if ($("round").value) choose($("round").value);
  } catch (e) { $("rounds-note").textContent = `The open rounds could not be listed: ${e.message}`; }
}

async function showLedger() {
  const entries = await ledger.entries();
  const lines = Object.entries(entries).map(([id, e]) =>
    `${id}: ${e.guarantee} eps ${e.epsilon} (${e.note}); the message kept for a retry: ${e.message.length} characters`);
  $("ledger").textContent = `local epsilon spent ${await ledger.spent()} of this browser's cap ${ledger.cap}\n` +
    (lines.join("\n") || "no rounds yet");
}

$("tofu").onclick = () => { if (/^sha256:/.test($("claimed").textContent)) $("key").value = $("claimed").textContent; };

$("sample").onclick = () => {
  const round = rounds.get($("round").value.trim());
  if (!round) return say("choose an open round first (the sample point is drawn inside its public bound)", "err");
  const b = round.bound;
  let p;
  if (b.low && b.high) p = b.low.map((lo, i) => lo + Math.random() * (b.high[i] - lo));
  else {
    const g = Array.from({ length: round.dim }, () => Math.sqrt(-2 * Math.log(1 - Math.random())) * Math.cos(2 * Math.PI * Math.random()));
    const norm = Math.hypot(...g) || 1;
    const r = (b.radius ?? 1) * 0.8 * Math.random() ** (1 / round.dim);
    p = g.map((v) => (v / norm) * r);
  }
  $("point").value = p.map((v) => v.toFixed(3)).join(", ");
};

$("go").onclick = async () => {
  const round = $("round").value.trim();
  const key = $("key").value.trim();
  if (key) localStorage.setItem("shoal-demo-key", key);
  say("encoding and sending…", "");
  const posted = []; // every request body the device sends, as sent
  const recording = async (url, init = {}) => {
    if ((init.method ?? "GET") !== "GET") {
      const body = init.body;
      const bytes = typeof body === "string" ? new TextEncoder().encode(body) : new Uint8Array(body ?? []);
      const type = new Headers(init.headers).get("content-type") ?? "";
      posted.push({ url: String(url).replace(api, ""), type, bytes, text: typeof body === "string" ? body : null });
    }
    return fetch(url, init);
  };
  try {
    const point = $("point").value.split(",").map((s) => Number(s.trim()));
    const device = new Device({ serverUrl: api, serverKey: key, ledger, fetch: recording });
    const answer = await device.participate(round, point);
    const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(" ");
    const sent = posted.map((p) => `POST ${p.url} (${p.type}): ${p.bytes.length} bytes\n` + (p.text ?? hex(p.bytes)));
    $("sent").textContent = (sent.join("\n\n") || "nothing new: this round's message was sent before (the ledger keeps it; a retry resends the same bytes)") +
      `\n\nserver answered: ${JSON.stringify(answer)}`;
    $("sent").dataset.bytes = String(posted.reduce((a, p) => a + p.bytes.length, 0));
    say("sent", "ok");
  } catch (e) {
    say(`${e.name}: ${e.message}`, "err");
  }
  await showLedger();
};

showKey();
showRounds();
showLedger();
