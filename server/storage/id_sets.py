"""Exact sets of the message ids a store holds, per round, in memory.

SQLite's inbox is an append-only table (``sqlite.py``, issue 42): it has no
key to refuse a retried message, so the store asks these sets instead. A set
is exact: built from both tables the first time a round is written, and
kept to what transactions committed (``begin`` / ``commit`` / ``rollback``
around each one: a rolled-back transaction's ids are taken out again), so a message id is stored at most once per
round as long as every writer of the file is this store (the store drops
every set when another connection wrote: ``PRAGMA data_version``).

Memory is bounded: about 82 bytes an id in CPython (a 16-byte ``bytes`` and
its slot; measured: 82.6 MB for 10^6 ids). Past ``budget`` ids in all, the
least recently written rounds' sets are dropped (rebuilt when written
again); a round larger than the whole budget gets no set (``None``), and the
store falls back to its primary key for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

ID_BUDGET = 1 << 22  # ids held in all (~350 MB at most)


class IdSets:
    """Per-round sets of stored message ids (16-byte keys), with a
    transaction's additions kept apart until it commits."""

    def __init__(self, budget: int = ID_BUDGET) -> None:
        if budget < 1:
            raise ValueError(f"the id budget must be >= 1, got {budget}")
        self.budget = budget
        self._sets: OrderedDict[int, set[bytes]] = OrderedDict()  # least recently written first
        self._added: list[tuple[int, list[bytes]]] = []  # the open transaction's new ids, by round
        self._too_large: set[int] = set()  # rounds past the budget: no set

    def held(self) -> int:
        """Ids held in all (committed sets)."""
        return sum(len(s) for s in self._sets.values())

    def has(self, seq: int) -> bool:
        """Is there a set for the round (or is it known to be too large)?"""
        return seq in self._sets or seq in self._too_large

    def load(self, seq: int, stored: Callable[[], NDArray[np.void]]) -> bool:
        """Build the round's set from ``stored()`` (its stored ids, V16) unless
        the round is known to be too large; False when it has no set."""
        if seq in self._too_large:
            return False
        if seq not in self._sets:
            ids = stored()
            if ids.shape[0] > self.budget:
                self._too_large.add(seq)
                return False
            self._sets[seq] = set(ids.tolist())
            self._shrink(keep=seq)
        return True

    def fresh(self, seq: int, keys: list[bytes]) -> NDArray[np.bool_] | None:
        """Which of ``keys`` are new to the round's loaded set: not stored, not
        added earlier in this transaction, not repeated earlier in ``keys``
        (None: all of them). They join the set at once, and leave it again if
        the transaction rolls back. Without duplicates (the common case) two
        C-level passes over the keys (a disjointness test and an update);
        with them, numpy over the batch."""
        base = self._sets[seq]
        if base.isdisjoint(keys):
            before = len(base)
            base.update(keys)
            if len(base) - before == len(keys):
                self._added.append((seq, keys))
                return None
            base.difference_update(keys)  # a key repeated inside the batch: none of them was there
        arr = np.array(keys, dtype="S16")  # fixed-width bytes compare whole (every key is 16 bytes)
        mask = np.zeros(len(keys), dtype=bool)
        mask[np.unique(arr, return_index=True)[1]] = True  # first occurrences
        seen = base.intersection(keys)
        if seen:
            mask &= ~np.isin(arr, np.array(sorted(seen), dtype="S16"))
        new = np.array(keys, dtype=object)[mask].tolist()
        base.update(new)
        self._added.append((seq, new))
        return mask

    def begin(self) -> None:
        self._added = []

    def commit(self) -> None:
        """The transaction committed: its ids stay in their rounds' sets."""
        touched = {seq for seq, _ in self._added if seq in self._sets}
        self._added = []
        for seq in touched:
            self._sets.move_to_end(seq)
        if touched:
            self._shrink(keep=next(reversed(self._sets)))

    def rollback(self) -> None:
        """The transaction rolled back: its ids leave the sets again (none of
        them was there before it: ``fresh`` adds only new ids)."""
        for seq, keys in self._added:
            if seq in self._sets:
                self._sets[seq].difference_update(keys)
        self._added = []

    def drop(self, seq: int) -> None:
        """Forget the round (its rows are deleted, or changed outside)."""
        self._sets.pop(seq, None)
        self._too_large.discard(seq)

    def clear(self) -> None:
        """Forget every round (another connection wrote the file)."""
        self._sets.clear()
        self._added = []
        self._too_large.clear()

    def _shrink(self, keep: int) -> None:
        """Drop the least recently written sets until the total fits the budget
        (``keep``'s own set stays: it fits alone); a set grown past the whole
        budget is dropped and its round marked too large."""
        if len(self._sets.get(keep, ())) > self.budget:
            self._sets.pop(keep)
            self._too_large.add(keep)
        total = self.held()
        for seq in list(self._sets):
            if total <= self.budget:
                break
            if seq != keep:
                total -= len(self._sets.pop(seq))
