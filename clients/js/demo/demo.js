// The demo page's logic (plain JS: it loads the built bundle as is).
// Query parameters prefill the form: ?key=sha256:...&round=<id>&rounds=<id>,<id>.
import { Device, Ledger, LocalStorageLedgerStore, messagesBinary, parseJson, parseTreeConfig } from "./shoal-device.js";

const $ = (id) => document.getElementById(id);
const q = new URLSearchParams(location.search);
const api = q.get("server") ?? location.origin;
$("key").value = q.get("key") ?? localStorage.getItem("shoal-demo-key") ?? "";
$("round").value = q.get("round") ?? "";
for (const id of (q.get("rounds") ?? "").split(",").filter(Boolean)) {
  const li = document.createElement("li");
  li.textContent = id;
  li.onclick = () => { $("round").value = id; };
  $("rounds").append(li);
}
const ledger = new Ledger(new LocalStorageLedgerStore("shoal-demo-ledger"), 10);

async function showLedger() {
  const entries = await ledger.entries();
  const lines = Object.entries(entries).map(([id, e]) => `${id}: ${e.guarantee} eps ${e.epsilon} (${e.note})`);
  $("ledger").textContent = `spent ${await ledger.spent()} of cap ${ledger.cap}\n` + (lines.join("\n") || "no rounds yet");
}

async function config() {
  const r = await fetch(`${api}/rounds/${encodeURIComponent($("round").value.trim())}/config`);
  if (!r.ok) throw new Error(`GET config: ${r.status} ${await r.text()}`);
  return parseTreeConfig(parseJson(await r.text()).config);
}

$("sample").onclick = async () => {
  try {
    const c = await config();
    const scale = c.bound.radius ?? 1;
    $("point").value = Array.from({ length: c.dim }, (_, i) => {
      const lo = c.bound.low ? c.bound.low[i] : -scale / 2, hi = c.bound.high ? c.bound.high[i] : scale / 2;
      return (lo + Math.random() * (hi - lo)).toFixed(3);
    }).join(", ");
  } catch (e) { $("status").innerHTML = `<span class="err">${e.message}</span>`; }
};

$("go").onclick = async () => {
  const round = $("round").value.trim();
  const key = $("key").value.trim();
  localStorage.setItem("shoal-demo-key", key);
  $("status").textContent = "encoding and sending…";
  try {
    const point = $("point").value.split(",").map((s) => Number(s.trim()));
    const device = new Device({ serverUrl: api, serverKey: key, ledger });
    const answer = await device.participate(round, point);
    const message = await ledger.messageFor(round);
    let bytes = "";
    try {
      const m = JSON.parse(message);
      if ("hist" in m) bytes = Array.from(messagesBinary([m]), (b) => b.toString(16).padStart(2, "0")).join(" ");
    } catch { /* not a tree report */ }
    $("sent").textContent = `JSON: ${message}\n` + (bytes ? `binary body (${bytes.split(" ").length} bytes): ${bytes}\n` : "") +
      `server answered: ${JSON.stringify(answer)}`;
    $("status").innerHTML = '<span class="ok">sent</span>';
  } catch (e) {
    $("status").innerHTML = `<span class="err">${e.name}: ${e.message}</span>`;
  }
  await showLedger();
};

showLedger();
