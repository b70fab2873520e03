"""A round's private answer is released once (issue 44, Build 1).

The first successful decode is the round's release: ``/cluster`` on a done
round returns the stored result, byte for byte, and never decodes again. A
kind whose decode draws private noise (the curator's, ``decode_draws_noise``)
can never be decoded a second time; the others may be decoded ``again`` (post-
processing), which adds a result and keeps every earlier one.
"""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.kinds import dump_config
from shoal.common.kinds.central import ALGORITHMS, derive_central_round
from shoal.common.kinds.elbow import derive_elbow
from shoal.common.kinds.local_refine import derive_local_refine
from shoal.common.kinds.partition import derive_partition
from shoal.common.kinds.refine import derive_refine
from shoal.common.kinds.sketch import derive_sketch_round
from shoal.common.kinds.tree import derive_config
from shoal.common.wire.envelope import seal
from shoal.common.wire.fields import new_message_id
from shoal.common.wire.models import PointMessage
from shoal.server.edge.api_models import ResultOut
from shoal.server.rounds.kinds import SERVER_KINDS
from shoal.server.rounds.service import RoundService, RoundsSettings, RoundStateError


def _configs(round_id: str) -> dict[str, object]:
    """A config of every kind that ``/cluster`` decodes (continual rounds release by steps)."""
    bound = PublicBound(radius=2.0)
    parent = np.eye(3)[:2] * 0.5
    return {
        "tree": derive_config(10_000, 3, 4, 4.0),
        "sketch": derive_sketch_round(10_000, 3, 4, 1.0, bound=bound, seed=7, round_id=round_id),
        "refine": derive_refine("parent", parent, bound, 1.0, 1e-7, 100, round_id=round_id),
        "elbow": derive_elbow("parent", parent, bound, "kmedian", 0.1, 1e-8, 100, round_id=round_id),
        "partition": derive_partition(10_000, 3, 4, 1.0, 1e-6, bound, 100, round_id=round_id),
        "local_refine": derive_local_refine("parent", parent, bound, 1.0, seed=3, round_id=round_id),
        "central": derive_central_round(10_000, 3, 4, 1.0, 1e-6, bound, algorithm="maxcover-003", seed=3,
                                        round_id=round_id),
    }


class _Nothing:
    def add(self, rows: object) -> None:
        pass

    def merge(self, other: object) -> None:
        pass


def test_every_kind_says_whether_its_decode_draws_noise_and_only_curator_kinds_do():
    assert {name: kind.decode_draws_noise for name, kind in SERVER_KINDS.items()} == {
        "tree": False, "sketch": False, "refine": False, "elbow": False, "partition": False,
        "local_refine": False, "central": True, "continual": True}


def test_every_kind_decoded_by_cluster_is_covered_below():
    assert set(_configs("r")) == {n for n, k in SERVER_KINDS.items() if k.storage != "events"}


@pytest.mark.parametrize("name", sorted(_configs("r")))
def test_a_done_round_of_every_kind_answers_its_stored_release_even_if_its_decode_would_draw_anew(
        name, tmp_path, monkeypatch):
    """Each kind's decode is replaced by one that draws fresh randomness on
    every call (the worst case): a second ``/cluster`` still returns the first
    answer, the decoder runs once, and ``again`` is refused exactly where the
    kind declares noise at decode (otherwise it adds version 2, keeping 1)."""
    service = RoundService(RoundsSettings(db_url=f"sqlite:///{tmp_path}/r.db", key_path=str(tmp_path / "k.pem")))
    kind = SERVER_KINDS[name]
    calls: list[int] = []

    def noisy_decode(config, acc, rounds, round_id):
        calls.append(1)
        return {"round_id": round_id, "centers": np.random.default_rng().random((2, 3)).tolist()}

    monkeypatch.setattr(kind, "decode", noisy_decode)
    monkeypatch.setattr(kind, "accumulator", lambda config: _Nothing())
    monkeypatch.setattr(service.store, "count_reports", lambda round_id: 1)
    service.store.create_round("r", dump_config(name, _configs("r")[name]))

    first = service.cluster("r")
    assert service.cluster("r") == first == service.result("r")
    assert len(calls) == 1
    if kind.decode_draws_noise:
        with pytest.raises(RoundStateError, match="released once"):
            service.cluster("r", again=True)
        assert len(calls) == 1 and [v["version"] for v in service.results("r")] == [1]
    else:
        second = service.cluster("r", again=True)
        assert second != first and len(calls) == 2
        assert [(v["version"], v["result"]) for v in service.results("r")] == [(1, first), (2, second)]
        assert service.result("r") == second
    assert service.get("r").state == "done"


def test_again_on_a_round_that_is_not_done_is_refused(tmp_path):
    service = RoundService(RoundsSettings(db_url=f"sqlite:///{tmp_path}/r.db", key_path=str(tmp_path / "k.pem")))
    service.store.create_round("r", dump_config("tree", derive_config(10_000, 3, 4, 4.0)))
    with pytest.raises(RoundStateError, match="no result to decode again"):
        service.cluster("r", again=True)
    assert service.get("r").state == "open"


def test_a_failed_re_decode_leaves_the_round_done_with_its_release(tmp_path, monkeypatch):
    service = RoundService(RoundsSettings(db_url=f"sqlite:///{tmp_path}/r.db", key_path=str(tmp_path / "k.pem")))
    kind = SERVER_KINDS["tree"]
    answers = iter([{"round_id": "r", "centers": [[0.0]]}, RuntimeError("decoder broke")])

    def decode(config, acc, rounds, round_id):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(kind, "decode", decode)
    monkeypatch.setattr(kind, "accumulator", lambda config: _Nothing())
    monkeypatch.setattr(service.store, "count_reports", lambda round_id: 1)
    service.store.create_round("r", dump_config("tree", derive_config(10_000, 3, 4, 4.0)))
    first = service.cluster("r")
    with pytest.raises(RuntimeError, match="decoder broke"):
        service.cluster("r", again=True)
    row = service.get("r")
    assert row.state == "done" and row.result == first and "decoder broke" in (row.error or "")
    assert service.cluster("r") == first


def test_a_stranded_re_decode_goes_back_to_done_not_closed(tmp_path):
    service = RoundService(RoundsSettings(db_url=f"sqlite:///{tmp_path}/r.db", key_path=str(tmp_path / "k.pem")))
    store = service.store
    store.create_round("r", dump_config("tree", derive_config(10_000, 3, 4, 4.0)))
    assert store.take_lease("r", "gone:1:x", 10.0, 0.0)
    assert store.end_lease("r", "gone:1:x", "done", result={"centers": [[1.0]]})
    assert not store.take_lease("r", "gone:1:x", 10.0, 0.0)  # done: only ``again`` may take it
    assert store.take_lease("r", "gone:1:x", 10.0, 0.0, again=True)
    assert store.free_lease("r", "gone:1:x")
    row = store.get_round("r")
    assert row.state == "done" and row.result == {"centers": [[1.0]]}


# -- central rounds through the HTTP API: every algorithm --
def _central_round(server, algorithm: str) -> str:
    body = {"k": 3, "dim": 2, "epsilon": 1.0, "delta": 1e-6, "n_expected": 400, "model": "central",
            "algorithm": algorithm, "bound": {"radius": 1.0}}
    r = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert r.status_code == 201, r.text
    rnd = r.json()
    key = base64.b64decode(rnd["server_public_key"])
    rng = np.random.default_rng(0)
    pts = np.clip(np.repeat(np.array([[-0.5, -0.5], [0.5, 0.0], [0.0, 0.6]]), 134, axis=0)
                  + 0.05 * rng.standard_normal((402, 2)), -0.9, 0.9)
    sealed = [base64.b64encode(seal(PointMessage(round_id=rnd["id"], message_id=new_message_id(),
                                                 points=[p.tolist()]).model_dump_json().encode(), key,
                                    rnd["id"])).decode() for p in pts]
    r = httpx.post(server.url + f"/rounds/{rnd['id']}/shuffled", json={"sealed": sealed},
                   headers={"Authorization": f"Bearer {server.shuffler}"}, timeout=60)
    assert r.status_code == 202 and r.json()["accepted"] == len(pts), r.text
    return str(rnd["id"])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_two_cluster_calls_on_a_done_central_round_return_the_same_bytes(server, algorithm):
    rid = _central_round(server, algorithm)
    url = server.url + f"/rounds/{rid}"
    first = httpx.post(url + "/cluster", headers=server.op_headers(), timeout=120)
    assert first.status_code == 200, first.text
    second = httpx.post(url + "/cluster", headers=server.op_headers(), timeout=120)
    assert second.status_code == 200 and second.content == first.content
    assert httpx.get(url + "/result").content == first.content
    again = httpx.post(url + "/cluster", json={"again": True}, headers=server.op_headers(), timeout=60)
    assert again.status_code == 409 and "released once" in again.json()["detail"]
    history = httpx.get(url + "/results", headers=server.op_headers()).json()
    assert [h["version"] for h in history] == [1]
    assert ResultOut(**history[0]["result"]).model_dump(mode="json") == first.json()
    assert httpx.get(url + "/results").status_code == 401  # operator only
