"""The device client against a real server; the ledger; no fastapi on devices."""

import subprocess
import sys

import httpx
import pytest

from shoal.client.device import Device, TransportError
from shoal.client.ledger import Ledger
from shoal.common.errors import PrivacyError


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


def test_ledger_survives_restarts(tmp_path):
    led = Ledger(tmp_path / "l.json", cap=4.0)
    led.charge("r", 1.5, "{}")
    again = Ledger(tmp_path / "l.json", cap=4.0)
    assert again.spent == 1.5 and again.message_for("r") == "{}"


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
        [sys.executable, "-m", "shoal.client.cli", "client", "report", "--server", server.url, "--round", rid,
         "--point", "0.1,0.2,0.3", "--ledger", str(tmp_path / "l.json")],
        capture_output=True, text=True, check=True,
    )
    assert '"accepted": 1' in out.stdout
