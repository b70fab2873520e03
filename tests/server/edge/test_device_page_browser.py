"""The TypeScript device's page, /device, in a real browser (issue 40, item 5):
a real ``shoal server`` on 127.0.0.1 serves the page and the built bundle
(``clients/js/dist/shoal-device.js``); in Debian's chromium a person pins the
server key they were given (read here from the server's key file, as an
operator would hand it out), sees the open rounds, chooses a local-model tree
round, takes a sample point and takes part. The server stores the report; the
page shows the bytes it posted and the ledger entry. Screenshot:
build/device-page.png. Skipped, with the reason, when no browser can start or
the bundle is not built and cannot be (no node_modules: ``cd clients/js &&
npm ci``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from shoal.common.wire.signing import identity_path, load_or_create_signing_key
from shoal.server.edge.routers.device_page import JS_ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[3]


def _bundle() -> None:
    if (JS_ROOT / "dist" / "shoal-device.js").is_file():
        return
    npm = shutil.which("npm")
    if npm is None or not (JS_ROOT / "node_modules").is_dir():
        pytest.skip("clients/js/dist/shoal-device.js is not built: cd clients/js && npm ci && npm run build")
    subprocess.run([npm, "run", "build"], cwd=JS_ROOT, check=True, capture_output=True, timeout=300)


@pytest.fixture
def page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (.ci/run installs it)")
    _bundle()
    with sync_api.sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        except Exception as exc:  # noqa: BLE001 - any failure to start means "no browser here"
            pytest.skip(f"chromium at {CHROMIUM} did not start: {exc}")
        yield browser.new_context(viewport={"width": 1000, "height": 1200}).new_page()
        browser.close()


def test_a_person_takes_part_from_the_device_page(server, page) -> None:
    from playwright.sync_api import expect

    page.set_default_timeout(30_000)
    op = server.op_headers()
    tree = httpx.post(f"{server.url}/rounds", headers=op, json={
        "k": 3, "dim": 2, "epsilon": 4, "n_expected": 1000, "encoder": "nettree", "bound": {"radius": 10}}).json()
    shuffle = httpx.post(f"{server.url}/rounds", headers=op, json={
        "k": 3, "dim": 2, "epsilon": 1, "delta": 1e-6, "min_batch": 100, "model": "shuffle", "n_expected": 1000,
        "bound": {"radius": 10}}).json()
    closed = httpx.post(f"{server.url}/rounds", headers=op, json={"k": 2, "dim": 2, "epsilon": 2, "n_expected": 100}).json()
    httpx.post(f"{server.url}/rounds/{closed['id']}/close", headers=op).raise_for_status()
    # The fingerprint a person trusts comes from the operator, out of band: here, the server's key file.
    pin = load_or_create_signing_key(identity_path(server.env["SHOAL_KEY_PATH"])).fingerprint

    problems: list[str] = []  # CSP violations and script errors surface as console errors
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(server.url + "/device")  # no token, no log-in
    assert page.url == server.url + "/device/"
    expect(page.locator("#claimed")).to_have_text(pin)  # what the server says (proves nothing; the page says so)
    assert "cannot prove who the server" in page.inner_text("body")
    page.fill("#key", pin)

    rows = page.locator("#rounds tbody tr")
    expect(rows).to_have_count(2)  # the closed round is not listed
    assert page.locator(f"#rounds tr[data-id='{closed['id']}']").count() == 0
    assert page.locator(f"#rounds tr[data-id='{shuffle['id']}'] button").count() == 0  # needs a shuffler
    page.click(f"#rounds tr[data-id='{tree['id']}'] button.choose")
    assert page.input_value("#round") == tree["id"]
    page.click("#sample")
    point = [float(v) for v in page.input_value("#point").split(",")]
    assert len(point) == 2 and sum(v * v for v in point) <= 100
    page.click("#go")
    expect(page.locator("#status")).to_have_text("sent")

    sent = page.inner_text("#sent")
    match = re.search(rf"POST /rounds/{tree['id']}/reports/binary \(application/octet-stream\): (\d+) bytes", sent)
    assert match, sent
    assert int(match.group(1)) == int(page.get_attribute("#sent", "data-bytes") or 0) > 0
    assert '"accepted":1' in sent
    ledger = page.inner_text("#ledger")
    assert f"{tree['id']}: local eps" in ledger and "local tree round" in ledger, ledger
    assert httpx.get(f"{server.url}/rounds/{tree['id']}").json()["reports"] == 1  # the server stored it
    (ROOT / "build").mkdir(exist_ok=True)
    page.screenshot(path=str(ROOT / "build" / "device-page.png"), full_page=True)

    # Taking part again resends the ledger's bytes, never a new randomisation: still one report.
    page.click("#go")
    expect(page.locator("#sent")).to_contain_text('"duplicates":1')
    assert httpx.get(f"{server.url}/rounds/{tree['id']}").json()["reports"] == 1
    assert not problems, problems


def test_a_page_on_another_origin_takes_part_when_the_operator_lists_it(server, page, tmp_path) -> None:
    """The TypeScript device embedded in the operator's own site (another
    origin: here a static server on another loopback port) reaches the
    shoal server only if SHOAL_DEVICE_ORIGINS lists that site; chromium
    enforces it (CORS), and a page not listed sends nothing."""
    from tests_helpers import free_port

    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(JS_ROOT / "dist" / "shoal-device.js", site / "shoal-device.js")
    (site / "index.html").write_text('<!doctype html><meta charset="utf-8"><title>a product page</title>')
    ports = {"listed": free_port(), "other": free_port()}
    statics = {name: subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=site,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name, port in ports.items()}
    try:
        server.kill()
        server.env["SHOAL_DEVICE_ORIGINS"] = f"http://127.0.0.1:{ports['listed']}"
        server.start()
        op = server.op_headers()
        tree = httpx.post(f"{server.url}/rounds", headers=op, json={
            "k": 3, "dim": 2, "epsilon": 4, "n_expected": 1000, "encoder": "nettree", "bound": {"radius": 10}}).json()
        pin = load_or_create_signing_key(identity_path(server.env["SHOAL_KEY_PATH"])).fingerprint
        script = """async ({ url, pin, round }) => {
            const m = await import("/shoal-device.js");
            const device = new m.Device({ serverUrl: url, serverKey: pin, retries: 0,
                                          ledger: new m.Ledger(new m.MemoryLedgerStore(), 10) });
            try { return JSON.stringify(await device.participate(round, [1.5, -2.0])); } catch (e) { return "refused: " + e; }
        }"""
        answers = {}
        for name, port in ports.items():
            for _ in range(50):  # the static server may take a moment to listen
                try:
                    httpx.get(f"http://127.0.0.1:{port}/index.html").raise_for_status()
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            page.goto(f"http://127.0.0.1:{port}/index.html")
            answers[name] = page.evaluate(script, {"url": server.url, "pin": pin, "round": tree["id"]})
        assert '"accepted":1' in answers["listed"], answers
        assert answers["other"].startswith("refused:"), answers
        assert httpx.get(f"{server.url}/rounds/{tree['id']}").json()["reports"] == 1
    finally:
        for p in statics.values():
            p.kill()
            p.wait()
