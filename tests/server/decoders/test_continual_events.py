"""Which stream events count (server/decoders/continual/events.py): ``next_steps``,
fed only the closing steps' rows and what the earlier steps left, applies
exactly the events ``split_steps`` applies over the whole stream."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.common.errors import DecodeError
from shoal.server.decoders.continual.events import (
    DELETE,
    HEAD,
    INSERT,
    Items,
    next_steps,
    split_steps,
)


def _stream(seed: int, steps: int = 12, dim: int = 3) -> np.ndarray:
    """Rows (in message-id order) of a hostile stream: retried insertions, deletions
    before insertions, re-insertions after deletion, double deletions, empty steps."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 2**64, size=(40, 2), dtype=np.uint64)
    tokens[1, 0] = tokens[0, 0]  # two tokens sharing their high word
    n = 600
    rows = np.zeros((n, HEAD + dim), dtype=np.uint64)
    rows[:, 0] = rng.integers(1, steps + 1, n)
    rows[rng.random(n) < 0.1, 0] = 5  # a crowded step; and step 7 left empty
    rows[rows[:, 0] == 7, 0] = 8
    rows[:, 1] = np.where(rng.random(n) < 0.55, INSERT, DELETE)
    rows[:, 2:4] = tokens[rng.integers(0, tokens.shape[0], n)]
    rows[:, HEAD:] = rng.uniform(-1, 1, size=(n, dim)).view(np.uint64)
    return rows


def _same(a, b):
    assert [e.step for e in a] == [e.step for e in b]
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.inserted, y.inserted) and np.array_equal(x.deleted, y.deleted)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("cuts", [(1, 12), (1, 3, 4, 5, 8, 9, 12), tuple(range(1, 13))])
def test_next_steps_applies_the_events_split_steps_applies_over_the_whole_stream(seed, cuts):
    rows, dim = _stream(seed), 3
    whole = split_steps(rows, dim, 1, 12)
    items, got = Items.empty(dim), []
    bounds = [*cuts[:-1], cuts[-1]]
    for first, last in zip([1, *(c + 1 for c in bounds[:-1])], bounds, strict=True):
        if first > last:
            continue
        mine = rows[(rows[:, 0] >= first) & (rows[:, 0] <= last)]
        events, items = next_steps(items, mine, dim, first, last)
        got += events
    _same(got, whole)
    assert sum(e.inserted.shape[0] for e in whole) > 0 and sum(e.deleted.shape[0] for e in whole) > 0


def test_what_the_steps_leave_is_every_inserted_token_once_with_its_liveness():
    rows, dim = _stream(7), 3
    _, items = next_steps(Items.empty(dim), rows, dim, 1, 12)
    events = split_steps(rows, dim, 1, 12)
    inserted = sum(e.inserted.shape[0] for e in events)
    deleted = sum(e.deleted.shape[0] for e in events)
    assert items.tokens.size == inserted and int(items.live.sum()) == inserted - deleted
    assert np.array_equal(np.sort(items.tokens), items.tokens) and np.unique(items.tokens).size == items.tokens.size


def test_rows_outside_the_steps_asked_for_are_refused():
    rows = _stream(0)
    with pytest.raises(DecodeError, match=r"rows of steps 1\.\.12 given for 2\.\.12"):
        next_steps(Items.empty(3), rows, 3, 2, 12)
