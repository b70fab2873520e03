"""The dashboard in a real browser (Debian's chromium driven by Playwright):
log in, create a round from the form, let devices report (``shoal sim
--round``), watch the live count, close, cluster, and read the result page
with its plot. Skipped, with the reason, only when no browser can start."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Without the background-networking flags chromium keeps dialling Google's hosts (closed network here).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
# 2,000 devices (18 s against 59 s at 6,000): the round is decoded and drawn all the same, but its
# coreset is small (6 circles once in CI), so the plot is asked for its density layer, not a size.
USERS = 2_000


@pytest.fixture
def page(tmp_path: Path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (.ci/run installs it)")
    with sync_api.sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        except Exception as exc:  # noqa: BLE001 - any failure to start means "no browser here"
            pytest.skip(f"chromium at {CHROMIUM} did not start: {exc}")
        context = browser.new_context()
        yield context.new_page()
        browser.close()


def test_operator_runs_a_round_from_the_dashboard(server, page, tmp_path: Path):
    page.set_default_timeout(60_000)
    page.goto(server.url + "/ui")
    assert page.url.startswith(server.url + "/ui/login")  # the dashboard needs the operator token
    page.fill("input[name=token]", "wrong-token-" + "w" * 10)
    page.click("button[type=submit]")
    assert "wrong operator token" in page.inner_text("[role=alert]")
    page.fill("input[name=token]", server.operator)
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/rounds")

    # Create the round from the form: the demo's city (2-D, public box [0, 100] km).
    page.fill("input[name=k]", "6")
    page.fill("input[name=dim]", "2")
    page.fill("input[name=epsilon]", "4")
    page.fill("input[name=n_expected]", str(USERS))
    page.fill("input[name=low]", "0,0")
    page.fill("input[name=high]", "100,100")
    page.click("form.create button[type=submit]")
    page.wait_for_url("**/ui/rounds/*?done=created")
    rid = page.url.split("/ui/rounds/")[1].split("?")[0]
    assert page.inner_text(".status .state") == "open"

    # Devices join the round by id and report; the page's count follows live.
    sim = subprocess.run([sys.executable, "-m", "shoal.common.cli", "sim", "--server-url", server.url, "--round", rid,
                          "--no-cluster", "--users", str(USERS), "--dataset", "city", "--json"],
                         capture_output=True, text=True, timeout=300, env=server.env)
    assert sim.returncode == 0, sim.stderr
    # Playwright's expect polls from Python: wait_for_function evaluates a string, which the
    # dashboard's CSP (script-src 'self', no 'unsafe-eval') refuses.
    from playwright.sync_api import expect

    expect(page.locator(".status .reports")).to_have_text(str(USERS), timeout=60_000)

    page.click("button[name=close]")
    page.wait_for_url("**?done=close")
    assert page.inner_text(".status .state") == "closed"
    assert "no more reports" in page.inner_text("[role=status]")
    page.click("button[name=cluster]")
    page.wait_for_url("**?done=cluster")

    assert page.inner_text(".status .state") == "done"
    verdict = page.inner_text(".verdict")
    assert verdict.startswith(("clusters:", "private mean:"))  # the certificate's call; both draw 6 centers
    assert len(page.query_selector_all("table.centers tbody tr")) == 6
    assert "each device" in page.inner_text("ul.privacy")
    plot = page.query_selector("svg.plot[data-plot=centers]")
    assert plot is not None and plot.bounding_box()["width"] > 300  # rendered, not just in the markup
    assert len(plot.query_selector_all("path.center")) == 6
    assert len(plot.query_selector_all("circle.density")) >= 1  # the coreset under the centers
    page.screenshot(path=str(tmp_path / "round.png"), full_page=True)

    # The rounds list shows it done, with its count.
    # The click only starts the navigation: wait for the list page and its row (CI once read the old page).
    page.click("text=all rounds")
    page.wait_for_url("**/ui/rounds")
    row = page.wait_for_selector(f"tr[data-round='{rid}']")
    assert row is not None and row.query_selector(".state").inner_text() == "done"
    assert row.query_selector(".reports").inner_text() == str(USERS)

    # A local round offers a local refine round (fresh devices, eps-LDP reports): no delta, no shares.
    page.goto(server.url + f"/ui/rounds/{rid}")
    form = page.query_selector("form.refine")
    assert form is not None and "fresh devices" in form.inner_text()
    assert form.query_selector("input[name=delta]") is None
    form.query_selector("input[name=epsilon]").fill("4")
    form.query_selector("button[name=refine]").click()
    page.wait_for_url("**/ui/rounds/*?done=created")
    child = page.url.split("/ui/rounds/")[1].split("?")[0]
    assert child != rid and page.inner_text(".status .state") == "open"
    import httpx

    cfg = httpx.get(server.url + f"/rounds/{child}").json()["config"]
    assert cfg["kind"] == "local_refine" and cfg["parent_id"] == rid


def test_operator_closes_a_continual_rounds_steps_from_its_page(server, page):
    """Issue 18: a continual round's page in a real browser: close a step with its
    button, then read the step's centers, elbow curve and the steps table."""
    import base64

    import httpx
    import numpy as np

    from shoal.common.wire.envelope import seal
    from shoal.common.wire.fields import new_message_id
    from shoal.common.wire.models import StreamMessage

    body = {"k": 3, "dim": 2, "epsilon": 50.0, "n_expected": 60, "model": "central", "algorithm": "continual",
            "tuning": {"horizon": 4, "levels": 5}}
    r = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert r.status_code == 201, r.text
    rid, key = r.json()["id"], base64.b64decode(r.json()["server_public_key"])
    rng = np.random.default_rng(1)
    pts = np.vstack([rng.normal([0.5, 0.5], 0.02, (30, 2)), rng.normal([-0.5, 0.0], 0.02, (30, 2))])
    sealed = [base64.b64encode(seal(StreamMessage(round_id=rid, message_id=new_message_id(), op="insert",
                                                  item=rng.bytes(16).hex(), point=p.tolist()).model_dump_json().encode(),
                                    key, rid)).decode() for p in pts]
    r = httpx.post(server.url + f"/rounds/{rid}/shuffled", json={"sealed": sealed},
                   headers={"Authorization": f"Bearer {server.shuffler}"})
    assert r.status_code == 202, r.text
    page.set_default_timeout(60_000)
    page.goto(server.url + f"/ui/login?next=/ui/rounds/{rid}")
    page.fill("input[name=token]", server.operator)
    page.click("button[type=submit]")
    page.wait_for_url(f"**/ui/rounds/{rid}")
    assert "No step closed yet" in page.inner_text("main")
    page.click("button[name=step]")
    page.wait_for_url(f"**/ui/rounds/{rid}?done=step")
    assert "Step 1" in page.inner_text("main") and page.is_visible("svg[data-plot=line]")
    assert page.inner_text("table.steps tbody tr td") == "1"
    assert page.inner_text("button[name=step]") == "close step 2"


def test_operator_opens_an_elbow_round_on_a_greedy_round_and_reads_its_curve(server, page):
    """A greedy tree round's page offers an elbow round; devices' shares arrive as the
    shuffler forwards them, and the elbow round's page draws the data's cost of every k'."""
    import httpx
    from tests_helpers import done_tree_round, send_shares

    from shoal.deploy.simulation.datasets import paper_mixture

    ds = paper_mixture(3000, d=4, k=3, seed=2)
    rid, _ = done_tree_round(server, ds.points, k=6, encoder="nettree", tuning={"tree": {"centers": "greedy"}})
    page.set_default_timeout(60_000)
    page.goto(server.url + "/ui/login")
    page.fill("input[name=token]", server.operator)
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/rounds")
    page.goto(server.url + f"/ui/rounds/{rid}")
    form = page.query_selector("form.elbow")
    assert form is not None and "every k'" in form.inner_text()
    form.query_selector("input[name=epsilon]").fill("1")
    form.query_selector("button[name=elbow]").click()
    page.wait_for_url("**/ui/rounds/*?done=created")
    child = page.url.split("/ui/rounds/")[1].split("?")[0]
    round_json = httpx.get(server.url + f"/rounds/{child}").json()
    assert round_json["config"]["kind"] == "elbow" and round_json["config"]["parent_id"] == rid
    send_shares(server, round_json, ds.points)
    page.click("button[name=cluster]")
    page.wait_for_url("**?done=cluster")
    assert page.inner_text(".status .state") == "done"
    plot = page.query_selector("svg[data-plot=line]")
    assert plot is not None and plot.bounding_box()["width"] > 300
    suggested = httpx.get(server.url + f"/rounds/{child}/result").json()["elbow"]["suggested_k"]
    assert f"suggested k' = {suggested}" in page.inner_text("main")
    assert "at once" in page.inner_text("main") and page.query_selector("form.elbow") is None


def test_every_result_shape_opens_in_the_browser_without_an_error(server, page, tmp_path: Path):
    """Issue 39: one server, a decoded round of every result shape (``dashboard_rounds.py``:
    fewer distinct centers than k, one report, d = 5, shuffle, sketch, central, greedy, refine,
    local refine, partition, elbow, continual); each page opens with no response >= 500, its centers
    table and plot drawn, no CSP refusal in the console, and is screenshot into ``tmp_path``."""
    import httpx
    from dashboard_rounds import Api, every_shape

    with httpx.Client(base_url=server.url, timeout=120) as client:
        shapes = every_shape(Api(client, server.operator, server.shuffler))
    failures: list[str] = []
    # Any answer >= 500, any failed fetch but the browser's own favicon guess, any CSP refusal.
    page.on("response", lambda r: failures.append(f"{r.status} {r.url}")
            if r.status >= 500 or (r.status >= 400 and not r.url.endswith("/favicon.ico")) else None)
    page.on("console", lambda m: failures.append(m.text)
            if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    page.set_default_timeout(30_000)
    page.goto(server.url + "/ui/login")
    page.fill("input[name=token]", server.operator)
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/rounds")
    for name, rid in shapes.items():
        assert page.query_selector(f"tr[data-round='{rid}']") is not None, name
    page.screenshot(path=str(tmp_path / "rounds.png"), full_page=True)
    for name, rid in shapes.items():
        response = page.goto(server.url + f"/ui/rounds/{rid}")
        assert response is not None and response.status == 200, name
        assert response.headers["content-security-policy"].endswith("frame-ancestors 'none'"), name
        plot = page.query_selector("svg.plot[data-plot=centers]")
        assert plot is not None and plot.bounding_box()["width"] > 300, name  # drawn, not just in the markup
        rows = len(page.query_selector_all("table.centers tbody tr"))
        assert rows >= 1 and len(plot.query_selector_all("path.center")) == rows, name
        assert "could not be drawn" not in page.inner_text("main"), name
        page.screenshot(path=str(tmp_path / f"{name.replace(' ', '-')}.png"), full_page=True)
    assert failures == []
    # Log out; the cookie saved before it no longer opens the dashboard.
    saved = page.context.cookies()
    page.click("button[name=logout]")
    page.wait_for_url("**/ui/login")
    page.context.add_cookies(saved)
    page.goto(server.url + "/ui/rounds")
    assert page.url.startswith(server.url + "/ui/login")
