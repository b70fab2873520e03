"""Every service logs (issue 16, item 4): request lines from uvicorn, and the
round events and decode timings from shoal's own loggers, as text or JSON.
Devices' requests are counted, not logged one by one (issue 39, Build 4): one
summary line per route and status every --access-summary-seconds; a line
each only at --log-level debug."""

import json
import logging
import os
import re
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from tests_helpers import free_port, wait_healthy

from shoal.client.encoder import encode
from shoal.common.cli import main
from shoal.common.kinds import parse_config
from shoal.common.services.access_log import AccessSummary, Route, access_summary

OP = "op-" + "x" * 20


def _run_server(tmp_path, *argv, **env_extra):
    port = free_port()
    env = dict(os.environ, SHOAL_OPERATOR_TOKEN=OP, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
               SHOAL_KEY_PATH=str(tmp_path / "key.pem"), **env_extra)
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 -- closed below, after the process
    proc = subprocess.Popen([sys.executable, "-m", "shoal.common.cli", "server", "--port", str(port), "--db",
                             f"sqlite:///{tmp_path / 's.db'}", *argv], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    return url, proc, log


def _one_round(url, reports=40):
    op = {"Authorization": f"Bearer {OP}"}
    rnd = httpx.post(url + "/rounds", json={"k": 2, "dim": 2, "epsilon": 4.0, "n_expected": 200, "encoder": "nettree"},
                     headers=op).json()
    cfg = parse_config(rnd["config"])
    rng = np.random.default_rng(0)
    for p in rng.uniform(-0.5, 0.5, (reports, 2)):
        httpx.post(url + f"/rounds/{rnd['id']}/reports", content=encode(p, cfg).model_dump_json(),
                   headers={"content-type": "application/json"})
    assert httpx.post(url + f"/rounds/{rnd['id']}/cluster", headers=op, timeout=60).status_code == 200
    return rnd["id"]


def _logged_round(tmp_path, *argv, **env_extra):
    """One round created, reported and decoded on a server process; its log."""
    url, proc, log = _run_server(tmp_path, *argv, **env_extra)
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


def test_reports_are_counted_in_one_summary_line_not_logged_one_by_one(tmp_path):
    rid, text = _logged_round(tmp_path)
    assert f"POST /rounds/{rid}/reports HTTP/1.1" not in text
    summaries = [line for line in text.splitlines() if "shoal.access: last" in line]
    assert len(summaries) == 1, summaries  # the run is shorter than 10 s: the final flush at shutdown
    assert "POST /rounds/{id}/reports 202 x 40" in summaries[0]
    assert "GET /healthz 200 x" in summaries[0]  # the start-up health polls are counted too
    assert f'"POST /rounds/{rid}/cluster HTTP/1.1" 200' in text  # the operator's requests keep their line


def test_the_summary_is_logged_while_the_server_runs(tmp_path):
    url, proc, log = _run_server(tmp_path, "--access-summary-seconds", "0.3")
    try:
        _one_round(url, reports=5)
        deadline = time.monotonic() + 10

        def counted() -> int:  # the five reports may fall in more than one 0.3 s window
            text = (tmp_path / "server.log").read_text()
            return sum(int(m) for m in re.findall(r"POST /rounds/\{id\}/reports 202 x (\d+)", text))

        while counted() < 5:
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        assert counted() == 5
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def test_at_log_level_debug_every_report_has_its_own_line(tmp_path):
    rid, text = _logged_round(tmp_path, "--log-level", "debug")
    assert text.count(f'"POST /rounds/{rid}/reports HTTP/1.1" 202') == 40
    assert "POST /rounds/{id}/reports 202 x 40" in text  # and the summary still counts them


def test_shoal_server_refuses_a_summary_interval_that_is_not_positive(capsys):
    assert main(["server", "--access-summary-seconds", "0"]) == 2
    assert "shoal server: --access-summary-seconds must be positive, got 0" in capsys.readouterr().err


def test_shoal_shuffler_refuses_a_summary_interval_that_is_not_positive(capsys):
    assert main(["shuffler", "--server-url", "http://127.0.0.1:9", "--access-summary-seconds", "-1"]) == 2
    assert "shoal shuffler: --access-summary-seconds must be positive, got -1" in capsys.readouterr().err


def _access_record(method, path, status):
    return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 0, '%s - "%s %s HTTP/%s" %d',
                             ("127.0.0.1:5000", method, path, "1.1", status), None)


def test_the_summary_counts_per_route_and_status_and_lets_other_requests_through(caplog):
    summary = AccessSummary([Route("POST", r"/rounds/[^/]+/messages", "/rounds/{id}/messages")])
    records = [_access_record("POST", "/rounds/a/messages", 202)] * 3 + [
        _access_record("POST", "/rounds/b/messages?x=1", 409), _access_record("POST", "/rounds/a/flush", 200),
        _access_record("GET", "/rounds/a/messages", 405)]
    passed = [r for r in records if summary.filter(r)]
    assert [r.args[2] for r in passed] == ["/rounds/a/flush", "/rounds/a/messages"]  # other routes, other methods
    with caplog.at_level(logging.INFO, logger="shoal.access"):
        summary.flush()
        summary.flush()  # nothing new: no line
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == ["POST /rounds/{id}/messages 202 x 3, 409 x 1"]


def test_an_access_summary_interval_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="must be positive, got 0"), access_summary([], every=0):
        pass
