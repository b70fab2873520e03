"""A decode on Dask that loses its cluster ends cleanly (issue 44, Build 2).

A real scheduler and real worker processes (``dask scheduler``, ``dask
worker --no-nanny``: a killed worker stays dead, as on a machine that went
away). The workers load a preload file that makes every partition task wait
first, so they are reliably mid-decode when the test kills them. Losing
every worker or the scheduler ends the decode well within its deadline: the
round goes back to ``closed`` with the error, ``/cluster`` answers 503, and
the next ``/cluster`` succeeds.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from tests_helpers import free_port

from shoal.client.encoder import encode_arrays
from shoal.common.errors import ConfigError
from shoal.common.kinds.tree import config_from_dict
from shoal.server.rounds import reduction
from shoal.server.rounds.kinds import RoundRequest
from shoal.server.rounds.service import RoundService, RoundsSettings

distributed = pytest.importorskip("distributed")

SLOW = """
import time
import shoal.server.rounds.reduction as r
if not hasattr(r, "_unslowed"):  # a worker may run its preload twice
    r._unslowed = r.read_into
def read_into(*a, **kw):
    time.sleep({seconds})
    return r._unslowed(*a, **kw)
r.read_into = read_into
"""


class Cluster:
    """A scheduler and worker processes on loopback, each killable."""

    def __init__(self, tmp: Path, workers: int = 2, slow_seconds: float = 60.0) -> None:
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.tmp = tmp
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
             str(self.port), "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.add_workers(workers, slow_seconds)

    def add_workers(self, count: int, slow_seconds: float = 0.0) -> None:
        preload = self.tmp / f"slow_{len(self.workers)}.py"
        preload.write_text(SLOW.format(seconds=slow_seconds))
        for _ in range(count):
            self.workers.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--no-nanny", "--nthreads", "1",
                 "--host", "127.0.0.1", "--no-dashboard", "--preload", str(preload)],
                stdout=subprocess.DEVNULL, stderr=(self.tmp / f"worker_{len(self.workers)}.log").open("wb")))
        with distributed.Client(self.address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(len([w for w in self.workers if w.poll() is None]), timeout=60)

    def kill_workers(self) -> None:
        for w in self.workers:
            w.kill()
            w.wait()

    def kill_scheduler(self) -> None:
        self.scheduler.kill()
        self.scheduler.wait()

    def close(self) -> None:
        self.kill_workers()
        self.kill_scheduler()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()


def _service(tmp_path, dask: str, deadline: float = 120.0) -> RoundService:
    return RoundService(RoundsSettings(db_url=f"sqlite:///{tmp_path}/rounds.db", key_path=str(tmp_path / "key.pem"),
                                       dask_scheduler=dask, dask_deadline_seconds=deadline))


def _round(service: RoundService, n: int = 2000) -> str:
    rid = service.create(RoundRequest(k=3, dim=4, epsilon=4.0, n_expected=n, encoder="lsh")).id
    _, cfg = service.round(rid)
    service.ingest(rid, encode_arrays(np.random.default_rng(1).uniform(-0.4, 0.4, (n, 4)), cfg).to_messages())
    return rid


def _kill_when_decoding(service: RoundService, rid: str, kill) -> threading.Thread:
    """Kill (``kill()``) once the round is decoding and its tasks are on the workers."""
    def run() -> None:
        while service.store.get_state(rid) != "decoding":
            time.sleep(0.05)
        time.sleep(1.0)  # the tasks reach the workers, which sleep in read_into
        kill()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_every_worker_killed_mid_decode_ends_it_well_within_the_deadline(tmp_path, cluster):
    service = _service(tmp_path, cluster.address, deadline=120.0)
    rid = _round(service)
    _kill_when_decoding(service, rid, cluster.kill_workers)
    t = time.monotonic()
    with pytest.raises(reduction.DaskUnavailable, match="lost every worker"):
        service.cluster(rid)
    assert time.monotonic() - t < 30  # the deadline is 120 s; no worker for NO_WORKERS_SECONDS ends it
    row = service.get(rid)
    assert row.state == "closed" and "lost every worker" in (row.error or "")
    cluster.add_workers(2)  # fresh workers, not slowed: the next decode succeeds on the cluster
    assert len(service.cluster(rid)["centers"]) == 3 and service.get(rid).state == "done"


def test_the_scheduler_killed_mid_decode_ends_it_and_the_next_cluster_succeeds(tmp_path, cluster):
    service = _service(tmp_path, cluster.address, deadline=120.0)
    rid = _round(service)
    _kill_when_decoding(service, rid, cluster.kill_scheduler)
    t = time.monotonic()
    with pytest.raises(reduction.DaskUnavailable):
        service.cluster(rid)
    assert time.monotonic() - t < 30
    assert service.get(rid).state == "closed"
    assert len(service.cluster(rid, dask="")["centers"]) == 3  # in this process: the cluster is gone


def test_a_decode_past_its_deadline_is_given_up_and_its_round_closed(tmp_path, cluster):
    service = _service(tmp_path, cluster.address, deadline=3.0)  # the slowed workers take 60 s
    rid = _round(service)
    t = time.monotonic()
    with pytest.raises(reduction.DaskUnavailable, match="deadline of 3 s"):
        service.cluster(rid)
    assert 3.0 <= time.monotonic() - t < 15
    assert service.get(rid).state == "closed"


def test_a_lost_cluster_falls_back_to_this_process_when_the_operator_allows_it(tmp_path, cluster):
    service = _service(tmp_path, cluster.address, deadline=120.0)
    rid = _round(service)
    _kill_when_decoding(service, rid, cluster.kill_workers)
    result = service.cluster(rid, fallback=True)
    assert len(result["centers"]) == 3 and service.get(rid).state == "done"
    assert service.metrics["dask_fallbacks"] == 1


def test_cluster_answers_503_then_200_over_http_when_every_worker_dies(server, cluster):
    server.kill()
    server.env.update(SHOAL_DASK_SCHEDULER=cluster.address, SHOAL_DASK_DEADLINE_SECONDS="120")
    server.start()
    r = httpx.post(server.url + "/rounds", json={"k": 3, "dim": 4, "epsilon": 4.0, "n_expected": 500},
                   headers=server.op_headers())
    rid = r.json()["id"]
    msgs = encode_arrays(np.zeros((300, 4)), config_from_dict(r.json()["config"])).to_messages()
    assert httpx.post(server.url + f"/rounds/{rid}/reports/batch",
                      json={"messages": [m.model_dump(mode="json") for m in msgs]}).status_code == 202

    def kill() -> None:
        while httpx.get(server.url + f"/rounds/{rid}").json()["state"] != "decoding":
            time.sleep(0.05)
        time.sleep(1.0)
        cluster.kill_workers()

    threading.Thread(target=kill, daemon=True).start()
    t = time.monotonic()
    lost = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=60)
    assert lost.status_code == 503 and "lost every worker" in lost.text and lost.headers["retry-after"]
    assert time.monotonic() - t < 30
    state = httpx.get(server.url + f"/rounds/{rid}").json()
    assert state["state"] == "closed" and "lost every worker" in state["error"]
    cluster.add_workers(1)
    ok = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=60)
    assert ok.status_code == 200, ok.text


def test_a_negative_deadline_is_refused():
    with pytest.raises(ConfigError, match="deadline"):
        reduction.deadline_seconds(10, -1.0)


def test_the_default_deadline_grows_with_the_round():
    assert reduction.deadline_seconds(0) == 60.0
    assert reduction.deadline_seconds(10**8) == pytest.approx(1060.0)
    assert reduction.deadline_seconds(10**8, 30.0) == 30.0
