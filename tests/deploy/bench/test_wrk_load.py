"""Parsing wrk's report (the services benchmark's single-POST rows); the load
itself runs in ``shoal bench --services`` when wrk is installed."""

import shutil

import httpx
import numpy as np
import pytest

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.deploy.bench.wrk_load import parse_wrk, run_wrk

SAMPLE = """Running 20s test @ http://127.0.0.1:8765/rounds/x/reports
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.00ms    4.07ms  66.26ms   97.81%
  Latency Distribution
     50%  842.00us
     75%    3.36ms
     90%    4.52ms
     99%    1.16s
  23424 requests in 20.02s, 3.57MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:   1170.18
"""


def test_wrk_report_is_parsed_with_units():
    r = parse_wrk(SAMPLE)
    assert r["requests"] == 23424 and r["seconds"] == pytest.approx(20.02)
    assert r["latency_ms"] == {"p50": pytest.approx(0.842), "p75": 3.36, "p90": 4.52, "p99": 1160.0}
    assert r["non_2xx"] == 7 and r["socket_errors"] == 3
    assert r["requests_per_second"] == pytest.approx(23424 / 20.02)


def test_a_report_without_requests_is_refused():
    with pytest.raises(ValueError, match="request count"):
        parse_wrk("unable to connect to 127.0.0.1:1 Connection refused")


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)")
def test_wrk_load_against_the_real_server_stores_every_answered_report(server, tmp_path):
    rnd = httpx.post(server.url + "/rounds", json={"k": 2, "dim": 2, "epsilon": 4.0, "n_expected": 3000},
                     headers=server.op_headers()).json()
    cfg = config_from_dict(rnd["config"])
    bodies = [m.model_dump_json() for m in encode_arrays(np.random.default_rng(0).uniform(-1, 1, (3000, 2)) * 0.5,
                                                         cfg).to_messages()]
    res = run_wrk(f"{server.url}/rounds/{rnd['id']}/reports", bodies, 10, 1, 20, tmp_path)
    stored = httpx.get(f"{server.url}/rounds/{rnd['id']}").json()["reports"]
    assert res["non_2xx"] == 0 and res["requests"] > 0
    assert res["requests"] <= stored <= res["requests"] + 10
