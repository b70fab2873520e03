"""Continual rounds through the round service (issue 18, Build 5/6;
``server/rounds/steps.py``): sealed insertions and deletions are stamped
with the open step, a closed step's release is the curator's output on
exactly the events applied at that step, deletions find their item,
retries and strays change nothing, and a replica that starts cold replays
the stream to the very same releases."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.wire.envelope import public_key_bytes, seal
from shoal.common.wire.fields import new_message_id
from shoal.common.wire.models import StreamMessage
from shoal.server.decoders.continual.events import split_steps
from shoal.server.decoders.continual.stream import ContinualGreedy
from shoal.server.rounds.kinds import RoundRequest
from shoal.server.rounds.service import RoundService, RoundsSettings, RoundStateError
from shoal.server.rounds.steps import noise_seed


def _service(tmp_path, db_url=None) -> RoundService:
    return RoundService(RoundsSettings(db_url=db_url or f"sqlite:///{tmp_path}/rounds.db",
                                       key_path=str(tmp_path / "key.pem")))


def _round(service, horizon=6, delta=0.0, dim=2, k=3, epsilon=50.0) -> str:
    req = RoundRequest(k=k, dim=dim, epsilon=epsilon, n_expected=100, encoder="continual", model="central", delta=delta,
                       bound=PublicBound(radius=1.0), tuning={"horizon": horizon, "levels": 4})
    return service.create(req).id


def _event(service, rid, op, item, point=None) -> str:
    msg = StreamMessage(round_id=rid, message_id=new_message_id(), op=op, item=item,
                        point=None if point is None else list(map(float, point)))
    return base64.b64encode(seal(msg.model_dump_json().encode(), public_key_bytes(service.key.public_key()),
                                 rid)).decode()


def _items(n, seed):
    rng = np.random.default_rng(seed)
    return [rng.bytes(16).hex() for _ in range(n)]


def _stream(service, rid, seed=0):
    """Three steps of events (inserted in step 1 and 2, some deleted in 2 and 3),
    sent and closed; returns the releases and the points applied per step."""
    rng = np.random.default_rng(seed)
    pts = np.clip(rng.normal([0.5, 0.5], 0.05, (60, 2)), -0.7, 0.7)
    items = _items(60, seed + 1)
    applied = []
    plan = [(range(0, 40), []), (range(40, 60), range(0, 10)), ([], range(10, 30))]
    releases = []
    for ins, dels in plan:
        sealed = [_event(service, rid, "insert", items[i], pts[i]) for i in ins]
        sealed += [_event(service, rid, "delete", items[i]) for i in dels]
        new, dup, refused = service.ingest_sealed(rid, sealed)
        assert (new, dup, refused) == (len(sealed), 0, [])
        releases.append(service.close_step(rid))
        applied.append((pts[list(ins)], pts[list(dels)]))
    return releases, applied


def test_a_closed_steps_release_is_the_curators_output_on_that_steps_events(tmp_path):
    service = _service(tmp_path)
    rid = _round(service)
    releases, applied = _stream(service, rid)
    assert [r["step"] for r in releases] == [1, 2, 3]
    kind, cfg = service.round(rid)
    # The same curator fed the same points (in token order, as the service does) gives the same release.
    rows = service.store.load_payloads(rid, *kind.row_width(cfg))
    greedy = ContinualGreedy(cfg.params, np.random.default_rng(noise_seed(service.key, rid)))
    for ev, rel in zip(split_steps(rows, 2, 1, 3), releases, strict=True):
        assert ev.inserted.shape[0] == {1: 40, 2: 20, 3: 0}[ev.step]
        assert ev.deleted.shape[0] == {1: 0, 2: 10, 3: 20}[ev.step]
        mine = greedy.step(ev.inserted, ev.deleted)
        assert np.array_equal(np.asarray(rel["ball_centers"]), cfg.bound.project_ball(mine.centers))
    # and the applied point sets are the ones sent (as multisets)
    for ev, (ins, dels) in zip(split_steps(rows, 2, 1, 3), applied, strict=True):
        assert np.array_equal(np.sort(ev.inserted, axis=0), np.sort(ins, axis=0))
        assert np.array_equal(np.sort(ev.deleted, axis=0), np.sort(dels, axis=0))
    assert service.step_releases(rid) == releases
    assert service.step_releases(rid, since=2) == releases[2:]


def test_the_released_centers_follow_the_population_with_a_loose_budget(tmp_path):
    service = _service(tmp_path)
    # k = 2: the greedy's first center and the private mean. At eps 50 the mean of step 3's 30 points
    # moves ~0.1 per coordinate (two discrete Laplace nodes on the sums and the count); at 400, ~0.012.
    rid = _round(service, k=2, epsilon=400.0)
    releases, _ = _stream(service, rid)
    for rel in releases:
        assert np.linalg.norm(np.asarray(rel["centers"]) - [0.5, 0.5], axis=1).min() < 0.15
    assert releases[0]["elbow"]["objective"] == "kmeans" and releases[0]["horizon"] == 6


def test_a_cold_replica_replays_the_stream_to_the_same_releases_and_goes_on(tmp_path):
    a = _service(tmp_path)
    rid = _round(a)
    releases, _ = _stream(a, rid)
    b = _service(tmp_path)  # a second process on the same store and key: no curator in memory
    assert b.step_releases(rid) == releases
    # one more step on each of two independent copies of the history gives the same release
    sealed = [_event(b, rid, "insert", _items(1, 9)[0], [-0.5, 0.2])]
    b.ingest_sealed(rid, sealed)
    after_b = b.close_step(rid)
    c = _service(tmp_path)
    assert c.step_releases(rid, since=3) == [after_b]
    # the release a replica that lost it computes again is the same (a crash between close and store)
    a.store._execute(a.store._sql("DELETE FROM round_steps WHERE step = 4"))
    d = _service(tmp_path)
    assert d.step_releases(rid, since=3) == [after_b]


def test_retried_duplicate_and_stray_events_change_nothing(tmp_path):
    service = _service(tmp_path)
    rid = _round(service)
    items = _items(3, 5)
    first = [_event(service, rid, "insert", items[0], [0.1, 0.1]), _event(service, rid, "insert", items[1], [0.2, 0.2])]
    service.ingest_sealed(rid, first)
    assert service.ingest_sealed(rid, first)[:2] == (0, 2)  # a retried batch is stored once
    strays = [_event(service, rid, "delete", items[2]),  # never inserted: dropped
              _event(service, rid, "delete", items[1]), _event(service, rid, "delete", items[1])]  # once only
    service.ingest_sealed(rid, strays)
    service.close_step(rid)
    service.ingest_sealed(rid, [_event(service, rid, "insert", items[0], [0.9, 0.0]),  # the same token again
                                _event(service, rid, "delete", items[1])])  # already deleted
    service.close_step(rid)
    kind, cfg = service.round(rid)
    one, two = split_steps(service.store.load_payloads(rid, *kind.row_width(cfg)), 2, 1, 2)
    assert sorted(one.inserted.tolist()) == [[0.1, 0.1], [0.2, 0.2]] and one.deleted.tolist() == [[0.2, 0.2]]
    assert two.inserted.size == two.deleted.size == 0


def test_a_deletion_before_its_insertion_is_dropped_and_the_item_stays(tmp_path):
    service = _service(tmp_path)
    rid = _round(service)
    item = _items(1, 7)[0]
    service.ingest_sealed(rid, [_event(service, rid, "delete", item)])
    service.close_step(rid)
    service.ingest_sealed(rid, [_event(service, rid, "insert", item, [0.3, 0.0])])
    service.close_step(rid)
    kind, cfg = service.round(rid)
    one, two = split_steps(service.store.load_payloads(rid, *kind.row_width(cfg)), 2, 1, 2)
    assert one.inserted.size == one.deleted.size == two.deleted.size == 0 and two.inserted.tolist() == [[0.3, 0.0]]


def test_steps_past_the_horizon_or_after_the_close_are_refused(tmp_path):
    service = _service(tmp_path)
    rid = _round(service, horizon=2)
    service.close_step(rid)
    service.close_step(rid)
    with pytest.raises(RoundStateError, match="all 2 steps of its horizon"):
        service.close_step(rid)
    rid2 = _round(service)
    service.close(rid2)
    with pytest.raises(RoundStateError, match="is closed: its stream has ended"):
        service.close_step(rid2)
    with pytest.raises(RoundStateError, match="not open"):
        service.ingest_sealed(rid2, [_event(service, rid2, "insert", _items(1, 1)[0], [0.0, 0.0])])


def test_events_committed_after_a_close_belong_to_the_next_step(tmp_path):
    service = _service(tmp_path)
    rid = _round(service)
    service.close_step(rid)
    service.ingest_sealed(rid, [_event(service, rid, "insert", _items(1, 3)[0], [0.0, 0.4])])
    kind, cfg = service.round(rid)
    rows = service.store.load_payloads(rid, *kind.row_width(cfg))
    assert rows[:, 0].tolist() == [2]


def test_a_continual_round_is_not_clustered_and_other_rounds_have_no_steps(tmp_path):
    service = _service(tmp_path)
    rid = _round(service)
    with pytest.raises(RoundStateError, match="releases at every step"):
        service.cluster(rid)
    other = service.create(RoundRequest(k=2, dim=2, epsilon=1.0, n_expected=100, encoder="maxcover", model="central",
                                        delta=1e-6)).id
    with pytest.raises(RoundStateError, match="only continual rounds have steps"):
        service.close_step(other)


def test_a_continual_round_needs_its_horizon_and_the_central_model(tmp_path):
    service = _service(tmp_path)
    with pytest.raises(ConfigError, match="tuning.horizon"):
        service.create(RoundRequest(k=2, dim=2, epsilon=1.0, n_expected=10, encoder="continual", model="central"))
    with pytest.raises(ConfigError, match="central"):
        service.create(RoundRequest(k=2, dim=2, epsilon=1.0, n_expected=10, encoder="continual", model="local",
                                    tuning={"horizon": 4}))


def test_bad_events_are_refused_item_by_item(tmp_path):
    service = _service(tmp_path)
    rid = _round(service)
    good = _event(service, rid, "insert", _items(1, 2)[0], [0.1, 0.0])
    wrong_dim = _event(service, rid, "insert", _items(1, 3)[0], [0.1, 0.0, 0.0])
    outside = _event(service, rid, "insert", _items(1, 4)[0], [2.0, 0.0])
    new, dup, refused = service.ingest_sealed(rid, [good, wrong_dim, outside])
    assert new == 1 and [i for i, *_ in refused] == [1, 2]


def test_two_insertions_of_one_token_in_one_step_count_once(tmp_path):
    service = _service(tmp_path)
    rid = _round(service)
    item = _items(1, 11)[0]
    service.ingest_sealed(rid, [_event(service, rid, "insert", item, [0.1, 0.0]),
                                _event(service, rid, "insert", item, [0.0, 0.1])])
    service.close_step(rid)
    kind, cfg = service.round(rid)
    (ev,) = split_steps(service.store.load_payloads(rid, *kind.row_width(cfg)), 2, 1, 1)
    assert ev.inserted.shape == (1, 2)
