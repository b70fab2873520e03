"""Small rounds of every kind, created and decoded through the real REST API,
so the dashboard tests read every result shape a decoder really produces.

Shared by the page tests (an in-process ``TestClient``) and the browser test
(an ``httpx.Client`` on a server process): both are ``httpx.Client``s with a
base URL. Each maker returns the round id of a decoded round (a continual
round: one closed step); ``every_shape`` makes one of each, in seconds.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import numpy as np
from numpy.typing import NDArray


@dataclass
class Api:
    """A client of one server, with the operator's and the shuffler's tokens."""

    client: httpx.Client
    operator: str
    shuffler: str

    @property
    def op(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.operator}"}

    def create(self, body: dict, path: str = "/rounds") -> dict:
        r = self.client.post(path, json=body, headers=self.op)
        assert r.status_code == 201, r.text
        out: dict = r.json()
        return out

    def cluster(self, rid: str) -> dict:
        r = self.client.post(f"/rounds/{rid}/cluster", headers=self.op, timeout=120)
        assert r.status_code == 200, r.text
        out: dict = r.json()
        return out

    def reports(self, rid: str, messages: list) -> None:
        msgs = [m.model_dump(mode="json") for m in messages]
        for lo in range(0, len(msgs), 5000):
            r = self.client.post(f"/rounds/{rid}/reports/batch", json={"messages": msgs[lo:lo + 5000]}, timeout=60)
            assert r.status_code == 202, r.text

    def shuffled(self, rid: str, sealed: list[bytes] | list[str]) -> None:
        """Sealed items (bytes, or already in base64) posted as the shuffler forwards them."""
        items = [s if isinstance(s, str) else base64.b64encode(s).decode() for s in sealed]
        for lo in range(0, len(items), 5000):
            r = self.client.post(f"/rounds/{rid}/shuffled", json={"sealed": items[lo:lo + 5000]},
                                 headers={"Authorization": f"Bearer {self.shuffler}"}, timeout=60)
            assert r.status_code == 202, r.text

    def shares(self, rnd: dict, points: NDArray[np.float64]) -> None:
        """A secure-sum round's shares of ``points``' devices (the kind's device half)."""
        from shoal.client.kinds import device_kind
        from shoal.common.kinds import kind_name, parse_config
        from shoal.common.mechanisms.secure_sum import encode_devices
        from shoal.common.wire.messages import sealed_share_parts

        cfg = parse_config(rnd["config"])
        contributions = device_kind(kind_name(rnd["config"])).contributions
        shares = encode_devices(contributions(points, cfg), cfg.secure_sum, np.random.default_rng(0))
        key = base64.b64decode(rnd["server_public_key"])
        self.shuffled(rnd["id"], [p for parts in sealed_share_parts(shares, key, rnd["id"]) for p in parts])


def blobs(n: int, d: int, seed: int = 0) -> NDArray[np.float64]:
    """Three tight clusters inside the unit ball (the default public bound)."""
    rng = np.random.default_rng(seed)
    mu = np.zeros((3, d))
    mu[0, 0], mu[1, 0], mu[2, 1 % d] = 0.5, -0.4, 0.45
    return mu[rng.integers(0, 3, n)] + 0.04 * rng.standard_normal((n, d))


def tree(api: Api, points: NDArray[np.float64], **body: object) -> str:
    """A tree round (lsh, local unless ``body`` says) of ``points``' devices, decoded."""
    from shoal.client.encoder import encode_arrays
    from shoal.common.kinds.tree import config_from_dict

    rnd = api.create({"k": 3, "dim": points.shape[1], "epsilon": 8.0, "n_expected": max(len(points), 1),
                      "encoder": "lsh"} | body)
    api.reports(rnd["id"], encode_arrays(points, config_from_dict(rnd["config"])).to_messages())
    api.cluster(rnd["id"])
    return str(rnd["id"])


def one_point(api: Api) -> str:
    """Every device at one point, k = 6: a mean-only round, k copies of one center."""
    return tree(api, np.full((50, 2), 0.3), k=6)


def fewer_distinct_centers(api: Api) -> str:
    """Devices at two points, k = 6: the tree finds two centers and repeats one of
    them, so ``center_errors`` (one per distinct center) is shorter than the six
    centers: the issue-39 500."""
    return tree(api, np.repeat(np.array([[0.5, 0.0], [-0.5, 0.2]]), 1000, axis=0), k=6)


def one_report(api: Api) -> str:
    return tree(api, blobs(1, 2, seed=5))


def tree_2d(api: Api) -> str:
    """Three clusters found, over a coreset of tens of nodes."""
    return tree(api, blobs(5000, 2, seed=1), encoder="nettree")


def tree_5d(api: Api) -> str:
    """d = 5: the picture is the coreset on its two principal axes."""
    return tree(api, blobs(3000, 5, seed=1))


def tree_shuffle(api: Api) -> str:
    """A shuffle tree round: its config's ``epsilon`` is the device's amplified eps0,
    its ``central_epsilon`` the operator's target."""
    return tree(api, blobs(400, 3, seed=2), model="shuffle", epsilon=1.0, delta=1e-6, min_batch=100)


def sketch(api: Api) -> str:
    """A local sketch round: ten devices of 100 records each."""
    from shoal.client.sketch_encoder import sketch_messages
    from shoal.common.kinds.sketch import sketch_round_from_dict

    rnd = api.create({"k": 3, "dim": 3, "epsilon": 1.0, "n_expected": 1000, "encoder": "sketch"})
    api.reports(rnd["id"], sketch_messages(blobs(1000, 3, seed=3), np.full(10, 100),
                                           sketch_round_from_dict(rnd["config"])))
    api.cluster(rnd["id"])
    return str(rnd["id"])


def _sealed_points(api: Api, body: dict, points: NDArray[np.float64],
                   message: Callable[[str, NDArray[np.float64]], object]) -> str:
    from shoal.common.wire.envelope import seal

    rnd = api.create(body)
    rid, key = rnd["id"], base64.b64decode(rnd["server_public_key"])
    api.shuffled(rid, [seal(message(rid, p).model_dump_json().encode(), key, rid)  # type: ignore[attr-defined]
                       for p in points])
    return str(rid)


def central(api: Api, algorithm: str | None = None) -> str:
    """A central round (the curator's algorithm on sealed raw points), decoded."""
    from shoal.common.wire.fields import new_message_id
    from shoal.common.wire.models import PointMessage

    body = {"k": 3, "dim": 2, "epsilon": 2.0, "n_expected": 3000, "model": "central", "delta": 1e-6}
    rid = _sealed_points(api, body | ({"algorithm": algorithm} if algorithm else {}), blobs(3000, 2, seed=4),
                         lambda rid, p: PointMessage(round_id=rid, message_id=new_message_id(), points=[p.tolist()]))
    api.cluster(rid)
    return rid


def continual(api: Api) -> str:
    """A continual round (insertions through the shuffler) with one closed step."""
    from shoal.common.wire.fields import new_message_id
    from shoal.common.wire.models import StreamMessage

    rng = np.random.default_rng(1)
    body = {"k": 3, "dim": 2, "epsilon": 50.0, "n_expected": 60, "model": "central", "algorithm": "continual",
            "tuning": {"horizon": 4, "levels": 5}}
    rid = _sealed_points(api, body, blobs(60, 2, seed=6), lambda rid, p: StreamMessage(
        round_id=rid, message_id=new_message_id(), op="insert", item=rng.bytes(16).hex(), point=p.tolist()))
    r = api.client.post(f"/rounds/{rid}/steps", headers=api.op)
    assert r.status_code == 200, r.text
    return rid


def partition(api: Api) -> str:
    rnd = api.create({"k": 3, "dim": 3, "epsilon": 1.0, "n_expected": 400, "encoder": "partition",
                      "model": "shuffle", "delta": 1e-6, "min_batch": 100})
    api.shares(rnd, blobs(400, 3, seed=7))
    api.cluster(rnd["id"])
    return str(rnd["id"])


def refine(api: Api, parent: str, points: NDArray[np.float64]) -> str:
    """A refine round (secure sums) on a done ``parent`` over ``points``' devices."""
    rnd = api.create({"epsilon": 1.0, "delta": 1e-7, "min_devices": 100}, f"/rounds/{parent}/refine")
    api.shares(rnd, points)
    api.cluster(rnd["id"])
    return str(rnd["id"])


def local_refine(api: Api, parent: str, points: NDArray[np.float64]) -> str:
    """A local refine round on a done local ``parent``: fresh devices' eps-LDP reports."""
    from shoal.client.kinds.local_refine import codebook_messages
    from shoal.common.kinds.local_refine import local_refine_from_dict

    rnd = api.create({"model": "local", "epsilon": 4.0}, f"/rounds/{parent}/refine")
    api.reports(rnd["id"], codebook_messages(points, local_refine_from_dict(rnd["config"])))
    api.cluster(rnd["id"])
    return str(rnd["id"])


def elbow(api: Api) -> tuple[str, str]:
    """A greedy tree round and the elbow round opened on it: (parent, elbow)."""
    points = blobs(600, 2, seed=8)
    parent = tree(api, points, k=5, encoder="nettree", tuning={"tree": {"centers": "greedy"}})
    rnd = api.create({"epsilon": 1.0, "delta": 1e-8, "min_devices": 100}, f"/rounds/{parent}/elbow")
    api.shares(rnd, points)
    api.cluster(rnd["id"])
    return parent, str(rnd["id"])


def every_shape(api: Api) -> dict[str, str]:
    """One decoded round of every result shape the dashboard must draw, by name."""
    out = {"fewer distinct centers than k": fewer_distinct_centers(api), "one point": one_point(api),
           "one report": one_report(api), "tree 2-D": tree_2d(api), "tree 5-D": tree_5d(api),
           "tree shuffle": tree_shuffle(api), "sketch": sketch(api), "central": central(api),
           "central greedy": central(api, "greedy-001"), "continual": continual(api), "partition": partition(api)}
    out["refine"] = refine(api, out["tree 2-D"], blobs(600, 2, seed=1))
    out["local refine"] = local_refine(api, out["tree 5-D"], blobs(600, 5, seed=9))
    out["greedy tree"], out["elbow"] = elbow(api)
    return out
