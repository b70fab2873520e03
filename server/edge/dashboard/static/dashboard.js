// The dashboard's only script: live report counts and states, and a confirm
// before delete. Every page works without it.
"use strict";
function refresh(el) {
  fetch(el.dataset.live, { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : null))
    .then((data) => {
      if (!data) return;
      const rows = Array.isArray(data) ? data : [data];
      for (const r of rows) {
        const row = Array.isArray(data) ? el.querySelector(`tr[data-round="${r.id}"]`) : el;
        if (!row) continue;
        row.querySelector(".state").textContent = r.state;
        row.querySelector(".reports").textContent = r.reports;
        if (!Array.isArray(data) && el.dataset.state !== r.state && r.state !== "decoding") {
          location.reload(); // a new state brings new actions (and maybe a result)
        }
      }
    })
    .catch(() => {});
}
document.addEventListener("DOMContentLoaded", () => {
  for (const el of document.querySelectorAll("[data-live]")) {
    setInterval(() => refresh(el), 2000);
  }
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (e) => { if (!confirm(form.dataset.confirm)) e.preventDefault(); });
  }
});
