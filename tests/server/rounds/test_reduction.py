"""Issue 19, Build 2: a round's reports summed on a Dask cluster (a real
``LocalCluster`` of two worker processes) give the accumulator the server
computes alone, for a tree round (reports) and a sketch round (payloads),
on SQLite and on the real PostgreSQL; the service decodes through it."""

from __future__ import annotations

import numpy as np
import pytest
from tests_helpers import pg_schema

from shoal.client.encoder import encode_arrays
from shoal.common.errors import ConfigError
from shoal.common.wire.fields import new_message_id
from shoal.server.rounds import reduction
from shoal.server.rounds.kinds import RoundRequest
from shoal.server.rounds.service import RoundService, RoundsSettings

distributed = pytest.importorskip("distributed", reason="the 'scale' extra (dask, distributed) is not installed")


@pytest.fixture(scope="module")
def scheduler():
    """Two worker processes, one thread each, on loopback."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address


def _service(tmp_path, db_url=None, dask=""):
    return RoundService(RoundsSettings(db_url=db_url or f"sqlite:///{tmp_path}/rounds.db",
                                       key_path=str(tmp_path / "key.pem"), dask_scheduler=dask))


def _tree_round(service, n=6000, dim=6):
    rid = service.create(RoundRequest(k=3, dim=dim, epsilon=4.0, n_expected=n, encoder="lsh")).id
    _, cfg = service.round(rid)
    rng = np.random.default_rng(3)
    centers = rng.uniform(-0.5, 0.5, (3, dim))
    points = np.clip(centers[rng.integers(0, 3, n)] + 0.05 * rng.standard_normal((n, dim)), -0.57, 0.57)
    msgs = encode_arrays(points, cfg).to_messages()
    for lo in range(0, n, 2000):
        service.ingest(rid, msgs[lo:lo + 2000])
    return rid


def _tables(acc):
    """Every array and count an accumulator holds, by attribute name."""
    return {k: v for k, v in vars(acc).items() if isinstance(v, (np.ndarray, int, float)) and k != "consumed"}


def _assert_same(a, b):
    ta, tb = _tables(a), _tables(b)
    assert ta.keys() == tb.keys() and ta
    for k in ta:
        if isinstance(ta[k], np.ndarray) and ta[k].dtype.kind in "fc":
            np.testing.assert_allclose(ta[k], tb[k], rtol=1e-12, atol=1e-9, err_msg=k)
        else:
            np.testing.assert_array_equal(ta[k], tb[k], err_msg=k)


def test_id_ranges_cover_every_id_once_in_order():
    ranges = reduction.id_ranges(7)
    assert ranges[0][0] is None and ranges[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    ids = [bytes.fromhex(new_message_id()) for _ in range(2000)] + [b"\x00" * 16, b"\xff" * 16]
    for i in ids:
        inside = [lo is None or i >= lo for lo, _ in ranges]
        below = [hi is None or i < hi for _, hi in ranges]
        assert sum(x and y for x, y in zip(inside, below, strict=True)) == 1


@pytest.mark.parametrize("parts", [0, 1 << 17])
def test_id_ranges_refuse_a_count_outside_1_to_65536(parts):
    with pytest.raises(ConfigError, match=str(parts)):
        reduction.id_ranges(parts)


@pytest.mark.parametrize("address", ["", "127.0.0.1:8786", "http://127.0.0.1:8786", "tcp://", "tcp://a b"])
def test_a_scheduler_address_must_be_tcp_or_tls(address):
    with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
        reduction.check_scheduler(address)


@pytest.mark.parametrize("address", ["tcp://" + "0" * 250, "tcp://host", "tcp://host:0", "tcp://host:99999",
                                     "tcp://:8786", "tcp://" + "h" * 254 + ":8786"])
def test_a_scheduler_address_without_a_usable_host_and_port_is_refused(address):
    with pytest.raises(ConfigError, match="HOST:PORT"):
        reduction.check_scheduler(address)


def test_an_in_memory_sqlite_store_cannot_be_read_by_workers():
    with pytest.raises(ConfigError, match="in-memory"):
        reduction.worker_url("sqlite:///:memory:")


def test_id_range_reads_partition_a_round_exactly(tmp_path):
    service = _service(tmp_path)
    rid = _tree_round(service, n=3000)
    whole = sum(c for c, _ in service.store.iter_rows(rid, 500))
    parts = [sum(c for c, _ in service.store.iter_rows(rid, 500, ids)) for ids in reduction.id_ranges(5)]
    assert whole == 3000 and sum(parts) == whole and min(parts) > 0


def test_tree_round_summed_on_dask_equals_the_one_process_sum(tmp_path, scheduler):
    service = _service(tmp_path)
    rid = _tree_round(service)
    kind, cfg = service.round(rid)
    here = reduction.accumulate(service.store, kind, cfg, rid)
    there = reduction.accumulate_on_dask(scheduler, service.settings.db_url, kind.name, cfg, rid,
                                         partitions=9, split_every=2)
    assert there.n_devices == here.n_devices == 6000
    _assert_same(here, there)


def test_sketch_round_payloads_summed_on_dask_equal_the_one_process_sum(tmp_path, scheduler):
    service = _service(tmp_path)
    rid = service.create(RoundRequest(k=3, dim=4, epsilon=4.0, n_expected=3000, encoder="sketch")).id
    kind, cfg = service.round(rid)
    width, dtype = kind.row_width(cfg)
    rows = np.random.default_rng(0).standard_normal((3000, width)).astype(dtype)
    service.store.add_payloads(rid, [new_message_id() for _ in range(3000)], rows)
    here = reduction.accumulate(service.store, kind, cfg, rid)
    there = reduction.accumulate_on_dask(scheduler, service.settings.db_url, kind.name, cfg, rid, partitions=4)
    _assert_same(here, there)


def test_postgres_round_summed_on_dask_equals_the_one_process_sum(tmp_path, scheduler):
    with pg_schema() as url:
        service = _service(tmp_path, db_url=url)
        rid = _tree_round(service, n=4000)
        kind, cfg = service.round(rid)
        here = reduction.accumulate(service.store, kind, cfg, rid)
        there = reduction.accumulate_on_dask(scheduler, url, kind.name, cfg, rid, partitions=3)
        _assert_same(here, there)


def test_service_decodes_on_its_settings_scheduler_without_reading_in_process(tmp_path, scheduler, monkeypatch):
    service = _service(tmp_path, dask=scheduler)
    rid = _tree_round(service)

    def not_here(*args, **kw):
        raise AssertionError("the in-process read ran")

    monkeypatch.setattr(reduction, "accumulate", not_here)
    result = service.cluster(rid)
    assert service.get(rid).state == "done"
    assert len(result["centers"]) == 3
    assert abs(sum(result["sizes"]) - 6000) < 600  # noisy cluster sizes of 6000 devices


def test_an_unreachable_scheduler_is_refused_before_the_round_changes_state(tmp_path, monkeypatch):
    from shoal.deploy.simulation.processes import free_port

    monkeypatch.setattr(reduction, "CONNECT_SECONDS", 1.0)
    service = _service(tmp_path)
    rid = _tree_round(service, n=2000)
    with pytest.raises(reduction.DaskUnavailable, match="cannot be reached"):
        service.cluster(rid, dask=f"tcp://127.0.0.1:{free_port()}")
    row = service.get(rid)
    assert row.state == "open" and row.error is None  # devices may still report
    assert len(service.cluster(rid, dask="")["centers"]) == 3  # in-process, over the settings' default


def test_a_scheduler_without_workers_is_dask_unavailable_not_a_wait_for_ever(tmp_path):
    service = _service(tmp_path)
    rid = _tree_round(service, n=1000)
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0") as empty:
        with pytest.raises(reduction.DaskUnavailable, match="no workers"):
            service.cluster(rid, dask=empty.scheduler_address)
    assert service.get(rid).state == "open"


def test_cluster_endpoint_answers_422_for_a_bad_scheduler_and_503_for_an_unreachable_one(server):
    import httpx

    from shoal.common.kinds.tree import config_from_dict
    from shoal.deploy.simulation.processes import free_port

    r = httpx.post(server.url + "/rounds", json={"k": 3, "dim": 4, "epsilon": 4.0, "n_expected": 500},
                   headers=server.op_headers())
    rid = r.json()["id"]
    msgs = encode_arrays(np.zeros((200, 4)), config_from_dict(r.json()["config"])).to_messages()
    assert httpx.post(server.url + f"/rounds/{rid}/reports/batch",
                      json={"messages": [m.model_dump(mode="json") for m in msgs]}).status_code == 202
    bad = httpx.post(server.url + f"/rounds/{rid}/cluster", json={"dask": "http://127.0.0.1:1"},
                     headers=server.op_headers())
    assert bad.status_code == 422 and "dask" in bad.text
    extra = httpx.post(server.url + f"/rounds/{rid}/cluster", json={"dask": "", "workers": 2},
                       headers=server.op_headers())
    assert extra.status_code == 422 and "workers" in extra.text
    gone = httpx.post(server.url + f"/rounds/{rid}/cluster", json={"dask": f"tcp://127.0.0.1:{free_port()}"},
                      headers=server.op_headers(), timeout=60)
    assert gone.status_code == 503 and "cannot be reached" in gone.text and gone.headers["retry-after"]
    assert httpx.get(server.url + f"/rounds/{rid}").json()["state"] == "open"  # refused before it changed
    again = httpx.post(server.url + f"/rounds/{rid}/cluster", json={}, headers=server.op_headers(), timeout=60)
    assert again.status_code == 200, again.text


def _payload_configs():
    from shoal.common.bounds import PublicBound
    from shoal.common.kinds.central import derive_central_round
    from shoal.common.kinds.local_refine import derive_local_refine
    from shoal.common.kinds.refine import derive_refine
    from shoal.common.kinds.sketch import derive_sketch_round

    bound = PublicBound(radius=2.0)
    return {
        "sketch": derive_sketch_round(10_000, 3, 4, 1.0, bound=bound, seed=7),
        "sketch shuffle": derive_sketch_round(10_000, 3, 4, 1.0, bound=bound, seed=7, model="shuffle", delta=1e-6,
                                              min_devices=1000),
        "refine": derive_refine("parent", np.eye(3)[:2] * 0.5, bound, 1.0, 1e-7, 100),
        "central": derive_central_round(10_000, 3, 4, 1.0, 1e-6, bound, algorithm="maxcover-003", seed=3),
        "local_refine": derive_local_refine("parent", np.eye(3)[:2] * 0.5, bound, 2.0, seed=3),
    }


@pytest.mark.parametrize("name", list(_payload_configs()))
def test_every_payload_kind_accumulator_pickles_and_merges_to_the_sum_of_its_parts(name):
    """What a Dask reduction does with an accumulator: pickle it to another
    process and merge it there; the result is the one-pass accumulator."""
    import pickle

    from shoal.server.rounds.kinds import server_kind

    cfg = _payload_configs()[name]
    kind = server_kind(name.split()[0])
    width, dtype = kind.row_width(cfg)
    rng = np.random.default_rng(5)
    rows = (rng.integers(0, 1 << 62, (300, width), dtype=np.uint64) if dtype is np.uint64
            else rng.standard_normal((300, width)))
    if name == "local_refine":  # (codebook nonce, index) rows: an index below the codebook's size
        rows[:, 1] = rng.integers(0, cfg.privunit.candidates, 300)
    whole = kind.accumulator(cfg)
    whole.add(rows)
    parts = []
    for chunk in (rows[:100], rows[100:]):
        acc = kind.accumulator(cfg)
        acc.add(chunk)
        parts.append(pickle.loads(pickle.dumps(acc)))
    parts[0].merge(parts[1])
    _assert_same(whole, parts[0])
