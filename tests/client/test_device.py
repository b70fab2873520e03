"""The device client against a real server; the ledger; no fastapi on devices."""

import subprocess
import sys

import httpx
import pytest

from shoal.client.device import Device, TransportError
from shoal.client.ledger import Ledger, Spend
from shoal.common.errors import PrivacyError, ReportError


def _round(server, eps=2.0):
    r = httpx.post(server.url + "/rounds", json={"k": 2, "dim": 3, "epsilon": eps, "n_expected": 1000},
                   headers=server.op_headers())
    return r.json()["id"]


def test_device_participates_once_per_round(server, tmp_path):
    rid = _round(server)
    dev = Device(server.url, tmp_path / "ledger.json", cap=5.0)
    assert dev.participate(rid, [0.1, 0.2, 0.3]) == {"accepted": 1, "duplicates": 0}
    # Participating again resends the recorded message: no new spend, no double count.
    assert dev.participate(rid, [0.9, 0.9, 0.9]) == {"accepted": 0, "duplicates": 1}
    assert dev.ledger.spent == pytest.approx(2.0)
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 1


def test_device_refuses_rounds_beyond_its_cap(server, tmp_path):
    a, b = _round(server, 2.0), _round(server, 2.0)
    dev = Device(server.url, tmp_path / "ledger.json", cap=3.0)
    dev.participate(a, [0.0, 0.0, 0.0])
    with pytest.raises(PrivacyError, match="spent 2 of its cap 3"):
        dev.participate(b, [0.0, 0.0, 0.0])
    assert httpx.get(server.url + f"/rounds/{b}").json()["reports"] == 0


def test_a_closed_round_is_refused_before_the_ledger_is_charged(server, tmp_path):
    rid = _round(server)
    assert httpx.post(server.url + f"/rounds/{rid}/close", headers=server.op_headers()).status_code == 200
    dev = Device(server.url, tmp_path / "ledger.json", cap=5.0)
    with pytest.raises(TransportError, match="is closed, not open: nothing was sent and nothing charged"):
        dev.participate(rid, [0.1, 0.2, 0.3])
    assert dev.ledger.spent == 0.0 and dev.ledger.message_for(rid) is None


@pytest.mark.parametrize("point, needle", [([0.1, 0.2], r"takes points of dimension 3; this one has shape \(2,\)"),
                                           ([0.1, float("nan"), 0.3], "non-finite"),
                                           (["a", "b", "c"], "not numbers")])
def test_a_wrong_point_is_refused_before_the_ledger_is_charged(server, tmp_path, point, needle):
    rid = _round(server)
    dev = Device(server.url, tmp_path / "ledger.json", cap=5.0)
    with pytest.raises(ReportError, match=needle):
        dev.participate(rid, point)
    assert dev.ledger.spent == 0.0 and httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0


def test_ledger_survives_restarts(tmp_path):
    led = Ledger(tmp_path / "l.json", cap=4.0)
    led.record("r", Spend("local", 1.5), lambda: "{}")
    again = Ledger(tmp_path / "l.json", cap=4.0)
    assert again.spent == 1.5 and again.message_for("r") == "{}"


def test_ledger_builds_a_rounds_message_once(tmp_path):
    led = Ledger(tmp_path / "l.json", cap=4.0)
    assert led.record("r", Spend("local", 1.0), lambda: "first") == "first"
    assert led.record("r", Spend("local", 1.0), lambda: pytest.fail("re-randomised")) == "first"
    assert led.spent == 1.0


def test_secure_sum_rounds_are_recorded_without_a_local_spend(tmp_path):
    led = Ledger(tmp_path / "l.json", cap=1.0)
    led.record("refine", Spend("none", 0.0, central_epsilon=5.0, delta=1e-6), lambda: "{}")
    assert led.spent == 0.0 and led.entries["refine"]["guarantee"] == "none"


def test_a_secure_sum_spend_cannot_claim_local_epsilon():
    with pytest.raises(PrivacyError, match="no local eps"):
        Spend("none", 1.0)


def _join_rounds(ledger: str, url: str, rounds: list[str], go: str) -> None:
    """One process: wait for the start file, then join every round on the shared ledger."""
    import time as _time
    from pathlib import Path as _Path

    while not _Path(go).exists():
        _time.sleep(0.005)
    dev = Device(url, ledger, cap=100.0)
    for rid in rounds:
        dev.participate(rid, [0.1, 0.2, 0.3])


def test_eight_processes_on_one_ledger_send_one_report_per_round(server, tmp_path):
    """Issue 12 acceptance: 8 processes sharing a ledger, each joining the same
    10 rounds: exactly one report per round reaches the server, and the
    ledger's total is the sum of its entries (each round charged once)."""
    import json as _json
    import multiprocessing

    rounds = [_round(server, 1.0) for _ in range(10)]
    ledger, go = str(tmp_path / "shared.json"), str(tmp_path / "go")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_join_rounds, args=(ledger, server.url, rounds[i:] + rounds[:i], go))
             for i in range(8)]
    for p in procs:
        p.start()
    (tmp_path / "go").write_text("")
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert [httpx.get(server.url + f"/rounds/{rid}").json()["reports"] for rid in rounds] == [1] * 10
    entries = _json.loads((tmp_path / "shared.json").read_text())["rounds"]
    assert sorted(entries) == sorted(rounds)
    led = Ledger(ledger, cap=100.0)
    assert led.spent == pytest.approx(sum(e["epsilon"] for e in entries.values())) == pytest.approx(10.0)


def test_unreachable_server_is_a_transport_error(tmp_path):
    dev = Device("http://127.0.0.1:9", tmp_path / "l.json", retries=1, backoff=0.01)
    with pytest.raises(TransportError, match="failed after 2 attempts"):
        dev.fetch_config("r")


def test_a_device_imports_no_fastapi():
    code = "import sys, shoal.client.device, shoal.client.encoder; print('fastapi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_client_report_command(server, tmp_path):
    rid = _round(server)
    out = subprocess.run(
        [sys.executable, "-m", "shoal.common.cli", "client", "report", "--server", server.url, "--round", rid,
         "--point", "0.1,0.2,0.3", "--ledger", str(tmp_path / "l.json")],
        capture_output=True, text=True, check=True,
    )
    assert '"accepted": 1' in out.stdout
    shown = subprocess.run([sys.executable, "-m", "shoal.common.cli", "client", "ledger", "--ledger",
                            str(tmp_path / "l.json")], capture_output=True, text=True, check=True).stdout
    assert "spent local eps 2 of cap 10 (8 left), 1 round(s)" in shown and f"{rid}: local eps 2" in shown


def test_client_ledger_of_a_new_device_is_empty(tmp_path, capsys):
    from shoal.common.cli import main

    assert main(["client", "ledger", "--ledger", str(tmp_path / "none.json"), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"spent": 0.0' in out and '"rounds": []' in out


def test_client_report_refuses_a_config_under_another_pin_with_a_clear_line(server, tmp_path):
    rid = _round(server)
    out = subprocess.run(
        [sys.executable, "-m", "shoal.common.cli", "client", "report", "--server", server.url, "--round", rid,
         "--point", "0.1,0.2,0.3", "--ledger", str(tmp_path / "l.json"), "--server-key", "sha256:" + "0" * 64],
        capture_output=True, text=True,
    )
    assert out.returncode == 1 and "not the pinned server key" in out.stderr and "Traceback" not in out.stderr


def test_a_local_refine_round_takes_fresh_devices_only(server, tmp_path):
    import numpy as np

    from shoal.client.encoder import encode_arrays
    from shoal.common.kinds.tree import config_from_dict

    rnd = httpx.post(server.url + "/rounds", json={"k": 2, "dim": 3, "epsilon": 4.0, "n_expected": 2000},
                     headers=server.op_headers()).json()
    veteran = Device(server.url, tmp_path / "veteran.json", cap=10.0)
    veteran.participate(rnd["id"], [0.1, 0.2, 0.3])
    points = np.random.default_rng(0).uniform(-0.5, 0.5, (1999, 3))
    msgs = [m.model_dump(mode="json") for m in encode_arrays(points, config_from_dict(rnd["config"])).to_messages()]
    assert httpx.post(server.url + f"/rounds/{rnd['id']}/reports/batch", json={"messages": msgs}).status_code == 202
    assert httpx.post(server.url + f"/rounds/{rnd['id']}/cluster", headers=server.op_headers(), timeout=60).status_code == 200
    first, second = (httpx.post(server.url + f"/rounds/{rnd['id']}/refine", json={"epsilon": 1.0},
                                headers=server.op_headers()).json()["id"] for _ in range(2))
    with pytest.raises(PrivacyError, match="fresh devices only"):
        veteran.participate(first, [0.1, 0.2, 0.3])
    assert veteran.ledger.spent == pytest.approx(4.0)
    fresh = Device(server.url, tmp_path / "fresh.json", cap=10.0)
    assert fresh.participate(first, [0.1, 0.2, 0.3]) == {"accepted": 1, "duplicates": 0}
    assert fresh.ledger.spent == pytest.approx(1.0)
    with pytest.raises(PrivacyError, match="fresh devices only"):  # a sibling of a round it answered
        fresh.participate(second, [0.1, 0.2, 0.3])
    assert httpx.get(server.url + f"/rounds/{first}").json()["reports"] == 1


def test_a_device_sends_its_tree_report_in_binary_and_a_retry_is_counted_once(server, tmp_path):
    seen = []
    client = httpx.Client(base_url=server.url, event_hooks={"request": [lambda r: seen.append(r)]})
    rid = _round(server)
    dev = Device(server.url, tmp_path / "ledger.json", cap=5.0, client=client)
    assert dev.participate(rid, [0.1, 0.2, 0.3]) == {"accepted": 1, "duplicates": 0}
    assert dev.participate(rid, [0.1, 0.2, 0.3]) == {"accepted": 0, "duplicates": 1}
    posts = [r for r in seen if r.method == "POST"]
    assert [r.url.path for r in posts] == [f"/rounds/{rid}/reports/binary"] * 2
    assert posts[0].headers["content-type"] == "application/octet-stream" and len(posts[0].content) == 43  # 5 + 38
    json_dev = Device(server.url, tmp_path / "other.json", cap=5.0, binary=False)
    assert json_dev.participate(rid, [0.1, 0.2, 0.3]) == {"accepted": 1, "duplicates": 0}
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 2
