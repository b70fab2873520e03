"""Every service logs (issue 16, item 4): request lines from uvicorn, and the
round events and decode timings from shoal's own loggers, as text or JSON."""

import json
import os
import subprocess
import sys

import httpx
import numpy as np
from tests_helpers import free_port, wait_healthy

from shoal.client.encoder import encode
from shoal.common.kinds import parse_config

OP = "op-" + "x" * 20


def _run_server(tmp_path, **env_extra):
    port = free_port()
    env = dict(os.environ, SHOAL_OPERATOR_TOKEN=OP, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
               SHOAL_KEY_PATH=str(tmp_path / "key.pem"), **env_extra)
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 -- closed below, after the process
    proc = subprocess.Popen([sys.executable, "-m", "shoal.common.cli", "server", "--port", str(port), "--db",
                             f"sqlite:///{tmp_path / 's.db'}"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    return url, proc, log


def _one_round(url):
    op = {"Authorization": f"Bearer {OP}"}
    rnd = httpx.post(url + "/rounds", json={"k": 2, "dim": 2, "epsilon": 4.0, "n_expected": 200, "encoder": "nettree"},
                     headers=op).json()
    cfg = parse_config(rnd["config"])
    rng = np.random.default_rng(0)
    for p in rng.uniform(-0.5, 0.5, (40, 2)):
        httpx.post(url + f"/rounds/{rnd['id']}/reports", content=encode(p, cfg).model_dump_json(),
                   headers={"content-type": "application/json"})
    assert httpx.post(url + f"/rounds/{rnd['id']}/cluster", headers=op, timeout=60).status_code == 200
    return rnd["id"]


def _logged_round(tmp_path, **env_extra):
    """One round created, reported and decoded on a server process; its log."""
    url, proc, log = _run_server(tmp_path, **env_extra)
    try:
        rid = _one_round(url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
    return rid, (tmp_path / "server.log").read_text()


def test_the_server_logs_round_events_and_decode_timings(tmp_path):
    rid, text = _logged_round(tmp_path)
    assert f"shoal.server.rounds: round {rid} created: kind tree, k=2, dim=2, model local, encoder nettree" in text
    assert f"round {rid} decoded in" in text
    assert f'"POST /rounds/{rid}/cluster HTTP/1.1" 200' in text  # uvicorn's request line


def test_shoal_log_json_writes_one_json_object_per_line(tmp_path):
    rid, text = _logged_round(tmp_path, SHOAL_LOG_JSON="1")
    ours = [json.loads(line) for line in text.splitlines() if line.startswith('{"time"')]
    assert any(r["logger"] == "shoal.server.rounds" and r["message"].startswith(f"round {rid} decoded in")
               for r in ours)
