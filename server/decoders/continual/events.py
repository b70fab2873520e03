"""Which stored stream events count, and at which step (issue 18, Build 5).

A continual round stores one row per event (``rounds/kinds/continual.py``):
the step it was committed in, insert (1) or delete (2), the item's 128-bit
token as two words, and the point's float64 bits (NaN for a delete). The
curator applies, for every item: its first insertion (in step order, and
within a step in message-id order: a retried or replayed insertion of the
same token is dropped), then its first deletion stamped at or after that
insertion (a deletion of an item not yet
inserted, or already deleted, is dropped). Within a step the points go in
token order, so every replica that replays the same rows feeds the
curator the same arrays. A step's outcome depends only on rows stamped at
or before it, which never change once it is closed: a replay gives the
releases already published.

What is dropped is never released: the number of events is exact data.
Pure numpy, vectorised over all events (one sort).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

INSERT, DELETE = 1, 2
HEAD = 4  # words before the point: step, op, item (high, low)


@dataclass(frozen=True)
class StepEvents:
    """One step's applied events: the points inserted and the points deleted (unit ball)."""

    step: int
    inserted: NDArray[np.float64]
    deleted: NDArray[np.float64]


def split_steps(rows: NDArray[np.uint64], dim: int, first: int, last: int) -> list[StepEvents]:
    """The applied events of steps ``first`` .. ``last`` from every stored row of the round."""
    rows = np.asarray(rows, dtype=np.uint64).reshape(-1, HEAD + dim)
    step, op, hi, lo = (rows[:, j] for j in range(HEAD))
    # by item, then step, inserts before deletes in a step; ties keep the stored (message-id) order
    order = np.lexsort((op, step, lo, hi))
    step, op, hi, lo = step[order], op[order], hi[order], lo[order]
    points = rows[order, HEAD:].view(np.float64)
    n = step.size
    pos = np.arange(n)
    start = np.ones(n, dtype=bool)
    start[1:] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
    group = np.cumsum(start) - 1
    groups = int(group[-1]) + 1 if n else 0
    first_insert = np.full(groups, n)
    np.minimum.at(first_insert, group[op == INSERT], pos[op == INSERT])
    later = (op == DELETE) & (pos > first_insert[group])
    first_delete = np.full(groups, n)
    np.minimum.at(first_delete, group[later], pos[later])
    has_insert = first_insert < n
    ins = first_insert[has_insert]
    dels_of = first_delete[has_insert]
    deleted = dels_of < n
    inserted = _by_step(step[ins], points[ins], first, last)
    removed = _by_step(step[dels_of[deleted]], points[ins[deleted]], first, last)
    return [StepEvents(t, a, b) for t, a, b in zip(range(first, last + 1), inserted, removed, strict=True)]


def _by_step(steps: NDArray[np.uint64], points: NDArray[np.float64], first: int,
             last: int) -> list[NDArray[np.float64]]:
    """Points cut by step (a stable sort keeps each step's points in token order)."""
    order = np.argsort(steps, kind="stable")
    steps, points = steps[order], points[order]
    cuts = np.searchsorted(steps, np.arange(first, last + 2, dtype=np.uint64))
    return [points[cuts[i]:cuts[i + 1]] for i in range(max(0, last - first + 1))]


def event_rows(ops: NDArray[np.uint64], items: NDArray[np.uint64], points: NDArray[np.float64]) -> NDArray[np.uint64]:
    """Rows to store (word 0, the step, is stamped by the store): ops (n,), items (n, 2), points (n, d)."""
    n, d = points.shape
    rows = np.zeros((n, HEAD + d), dtype=np.uint64)
    rows[:, 1] = ops
    rows[:, 2:4] = items
    rows[:, HEAD:] = np.ascontiguousarray(points, dtype=np.float64).view(np.uint64)
    return rows
