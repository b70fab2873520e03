"""Two server replicas on one PostgreSQL behave as one service (issue 19,
Build 3): a round created on one is served by both, devices spread over
both are each counted once, two decodes started at once make one result,
and a round closed on one is closed on the other."""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

import httpx
import pytest
from tests_helpers import pg_schema, spawn_server

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.common.wire.binary import CONTENT_TYPE, encode_reports
from shoal.deploy.simulation.datasets import paper_mixture
from shoal.deploy.simulation.processes import free_port, wait_healthy

OP = {"Authorization": "Bearer op-" + "x" * 20}


@pytest.fixture
def replicas(tmp_path: Path):
    with pg_schema() as db:
        env = dict(os.environ, SHOAL_OPERATOR_TOKEN="op-" + "x" * 20, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
                   SHOAL_KEY_PATH=str(tmp_path / "key.pem"))  # one identity key, as a deployment shares it
        procs, urls = [], []
        for _ in range(2):
            port = free_port()
            procs.append(spawn_server(env, port, db))
            urls.append(f"http://127.0.0.1:{port}")
            wait_healthy(urls[-1], procs[-1])
        yield urls
        for p in procs:
            p.kill()
            p.wait()


def test_two_replicas_count_every_device_once_and_decode_once(replicas):
    a, b = replicas
    body = {"k": 3, "dim": 4, "epsilon": 8.0, "n_expected": 8000, "encoder": "lsh"}
    rnd = httpx.post(a + "/rounds", json=body, headers=OP).json()
    rid, cfg = rnd["id"], config_from_dict(rnd["config"])
    assert httpx.get(b + f"/rounds/{rid}").json()["state"] == "open"  # created on a, known to b
    msgs = [m.model_dump(mode="json") for m in encode_arrays(paper_mixture(8000, d=4, k=3, seed=5).points,
                                                              cfg).to_messages()]
    for i in range(0, 8000, 1000):  # alternate replicas; every batch also retried on the other one
        first, other = (a, b) if (i // 1000) % 2 == 0 else (b, a)
        chunk = {"messages": msgs[i:i + 1000]}
        assert httpx.post(first + f"/rounds/{rid}/reports/batch", json=chunk, timeout=60).json()["accepted"] == 1000
        assert httpx.post(other + f"/rounds/{rid}/reports/batch", json=chunk, timeout=60).json() == {
            "accepted": 0, "duplicates": 1000}
    assert httpx.get(a + f"/rounds/{rid}").json()["reports"] == httpx.get(b + f"/rounds/{rid}").json()["reports"] == 8000
    assert httpx.post(a + f"/rounds/{rid}/close", headers=OP).status_code == 200
    late = encode_reports(encode_arrays(paper_mixture(10, d=4, k=3, seed=6).points, cfg))
    r = httpx.post(b + f"/rounds/{rid}/reports/binary", content=late, headers={"content-type": CONTENT_TYPE})
    assert r.status_code == 409, r.text  # closed on a: b refuses too, no stale "open"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda u: httpx.post(u + f"/rounds/{rid}/cluster", headers=OP, timeout=120),
                                (a, b)))
    codes = sorted(r.status_code for r in answers)
    assert codes in ([200, 409], [200, 200]), [r.text for r in answers]
    done = [r.json() for r in answers if r.status_code == 200]
    assert all(d["diagnostics"]["n_devices"] == 8000 for d in done)
    ra, rb = (httpx.get(u + f"/rounds/{rid}/result").json() for u in (a, b))
    assert ra == rb and ra["diagnostics"]["n_devices"] == 8000
