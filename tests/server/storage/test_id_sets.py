"""The exact per-round sets of stored message ids that refuse a retried
message in SQLite's append-only inbox (``server/storage/id_sets.py``)."""

import numpy as np
import pytest

from shoal.server.storage.id_sets import IdSets


def _ids(*values: int) -> list[bytes]:
    return [v.to_bytes(16, "big") for v in values]


def _stored(*values: int):
    return lambda: np.frombuffer(b"".join(_ids(*values)), dtype="V16")


def test_new_ids_are_all_fresh_and_count_as_stored_from_then_on():
    sets = IdSets()
    assert sets.load(1, _stored(1, 2))
    sets.begin()
    assert sets.fresh(1, _ids(3, 4)) is None
    assert sets.fresh(1, _ids(4, 5)).tolist() == [False, True]  # 4 came earlier in the same transaction
    sets.commit()
    sets.begin()
    assert sets.fresh(1, _ids(1, 3, 5, 6)).tolist() == [False, False, False, True]
    assert sets.held() == 6


def test_an_id_repeated_inside_a_batch_is_fresh_once_at_its_first_place():
    sets = IdSets()
    sets.load(1, _stored(9))
    sets.begin()
    assert sets.fresh(1, _ids(7, 8, 7, 9, 8)).tolist() == [True, True, False, False, False]
    sets.commit()
    assert sets.held() == 3


def test_a_rolled_back_transaction_leaves_no_id_behind():
    sets = IdSets()
    sets.load(1, _stored(1))
    sets.begin()
    sets.fresh(1, _ids(2, 3))
    sets.fresh(1, _ids(3, 4))
    sets.rollback()
    assert sets.held() == 1
    sets.begin()
    assert sets.fresh(1, _ids(1, 2, 3, 4)).tolist() == [False, True, True, True]


def test_rounds_are_apart():
    sets = IdSets()
    sets.load(1, _stored(1))
    sets.load(2, _stored())
    sets.begin()
    assert sets.fresh(2, _ids(1)) is None


def test_the_least_recently_written_rounds_leave_when_the_budget_is_passed():
    sets = IdSets(budget=5)
    sets.load(1, _stored(1, 2))
    sets.load(2, _stored(3))
    sets.begin()
    sets.fresh(1, _ids(4))  # round 1 written last
    sets.commit()
    sets.load(3, _stored(5, 6))  # 3 + 1 + 2 > 5: round 2 goes, round 1 (written since) stays
    assert not sets.has(2) and sets.has(1) and sets.has(3)
    assert sets.held() == 5


def test_a_round_larger_than_the_whole_budget_has_no_set():
    sets = IdSets(budget=2)
    assert not sets.load(1, _stored(1, 2, 3))
    assert sets.has(1)  # known: too large, not loaded again
    assert not sets.load(1, _stored())
    assert sets.load(2, _stored(1))
    sets.begin()
    sets.fresh(2, _ids(2, 3))  # grows past the budget
    sets.commit()
    assert not sets.load(2, _stored(1, 2, 3))


def test_dropping_a_round_or_clearing_forgets_it():
    sets = IdSets()
    sets.load(1, _stored(1))
    sets.load(2, _stored(2))
    sets.drop(1)
    assert not sets.has(1) and sets.has(2)
    sets.clear()
    assert sets.held() == 0 and not sets.has(2)


@pytest.mark.parametrize("budget", [0, -1])
def test_a_budget_below_one_is_refused(budget):
    with pytest.raises(ValueError, match=f"the id budget must be >= 1, got {budget}"):
        IdSets(budget)


def test_a_batch_repeating_a_stored_id_leaves_every_shard_as_it_was_but_for_its_new_ids():
    """The one-pass path adds a batch's keys shard by shard and, at the first
    key already there, takes out what it added (earlier shards' keys and the
    refused shard's new ones) before the batch goes the slow way."""
    stored = [bytes([b]) + bytes(15) for b in (0, 100, 200)]
    sets = IdSets()
    sets.load(1, lambda: np.frombuffer(b"".join(stored), dtype="V16"))
    new = [bytes([b]) + bytes([1]) * 15 for b in (0, 50, 100, 150, 250)]
    batch = new[:3] + [stored[1]] + new[3:]  # the stored id in the middle shard
    sets.begin()
    assert sets.fresh(1, batch).tolist() == [True, True, True, False, True, True]
    sets.commit()
    held = sorted(k for shard in sets._sets[1].shards for k in shard)
    assert held == sorted(stored + new) and sets.held() == 8


def test_random_ids_over_every_shard_are_fresh_exactly_as_a_python_set_says():
    rng = np.random.default_rng(3)
    pool = [bytes(rng.integers(0, 256, 16, dtype=np.uint8)) for _ in range(2000)]  # first bytes: every shard
    sets = IdSets()
    sets.load(1, lambda: np.frombuffer(b"".join(pool[:300]), dtype="V16"))
    seen = set(pool[:300])
    for _ in range(20):
        batch = [pool[i] for i in rng.integers(0, len(pool), size=int(rng.integers(1, 300)))]
        want = []
        for k in batch:
            want.append(k not in seen)
            seen.add(k)
        sets.begin()
        mask = sets.fresh(1, batch)
        assert (np.ones(len(batch), dtype=bool) if mask is None else mask).tolist() == want
        sets.commit()
        held = [k for shard in sets._sets[1].shards for k in shard]
        assert len(held) == len(set(held)) and set(held) == seen  # a refused fast path leaves no key behind
    assert sets.held() == len(seen)
    sets.begin()
    extra = [bytes(rng.integers(0, 256, 16, dtype=np.uint8)) for _ in range(200)]
    assert sets.fresh(1, extra) is None
    sets.rollback()
    assert sets.held() == len(seen)
    sets.begin()
    assert sets.fresh(1, extra) is None  # rolled back: new again
