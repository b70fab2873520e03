"""Exact sets of the message ids a store holds, per round, in memory.

SQLite's inbox is an append-only table (``sqlite.py``, issue 42): it has no
key to refuse a retried message, so the store asks these sets instead. A set
is exact: built from both tables the first time a round is written, and
kept to what transactions committed (``begin`` / ``commit`` / ``rollback``
around each one: a rolled-back transaction's ids are taken out again), so a
message id is stored at most once per round as long as every writer of the
file is this store (the store drops every set when another connection
wrote: ``PRAGMA data_version``).

A round's ids are ``SHARDS`` dicts of ids to None, by ranges of each id's
first byte, for two pauses a plain ``set`` made in the server, each
holding the GIL and so every request (issue 42, 10^6 reports over 16
connections): a full garbage collection walks every element of a set (138 ms
at 987k ids), while CPython never tracks a dict of bytes and None; and a
set or dict doubling past ~350k and ~700k ids rehashes them all at once
(40-100 ms), where a shard rehashes 1-2% of them, and shards of unequal
sizes at different moments.

Memory is bounded: about 90 bytes an id in CPython (a 16-byte ``bytes`` and
its dict entry; measured: 42 MB of dict for 10^6 ids, beside the bytes).
Past ``budget`` ids in all, the least recently written rounds' sets are
dropped (rebuilt when written again); a round larger than the whole budget
gets no set, and the store falls back to its primary key for it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from itertools import islice, repeat
from operator import itemgetter

import numpy as np
from numpy.typing import NDArray

ID_BUDGET = 1 << 22  # ids held in all (~380 MB at most)
# A round's ids in 64 dicts by the id's first byte, in ranges 2-6 values wide:
# shards of unequal sizes double at different moments, so no commit pays
# for all of them (equal shards all crossed 2/3 full within a few commits).
_WIDTHS = [2, 3, 4, 5, 6] * 12 + [4] * 4
SHARDS = len(_WIDTHS)
_SHARD_OF = np.repeat(np.arange(SHARDS, dtype=np.uint8), _WIDTHS)  # first byte -> shard


def _shard_slices(keys: Sequence[bytes]) -> list[tuple[int, Sequence[bytes]]]:
    """``keys`` grouped by shard, each group in the keys' order: (shard, its
    keys) for each shard with any. Numpy finds the groups; the keys are
    gathered in C (``itemgetter``), never by a Python loop per key."""
    if not keys:
        return []
    raw = np.frombuffer(b"".join(keys), dtype=np.uint8)
    if raw.shape[0] != 16 * len(keys):
        raise ValueError("message keys must be 16 bytes each")
    first = _SHARD_OF[raw[::16]]
    order = np.argsort(first, kind="stable")
    ordered = itemgetter(*order.tolist())(keys) if len(keys) > 1 else (keys[0],)
    counts = np.bincount(first, minlength=SHARDS)
    ends = np.cumsum(counts)
    return [(s, ordered[int(ends[s] - counts[s]):int(ends[s])]) for s in np.flatnonzero(counts).tolist()]


class _RoundIds:
    """One round's ids: ``SHARDS`` dicts (module docstring)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        self.shards: list[dict[bytes, None]] = [{} for _ in range(SHARDS)]
        self.count = 0
        self.add(_shard_slices(keys))

    def add_all_new(self, parts: list[tuple[int, Sequence[bytes]]]) -> bool:
        """Add the keys if every one is new (none there, none repeated): one
        C-level pass over each shard's keys. Otherwise the shards are left as
        they were and False returned: a dict keeps insertion order, so the keys
        a refused part added are its last ones, taken out again in C."""
        done: list[tuple[int, Sequence[bytes]]] = []
        for s, part in parts:
            shard = self.shards[s]
            before = len(shard)
            shard.update(dict.fromkeys(part))
            grown = len(shard) - before
            if grown != len(part):
                deque(map(shard.pop, list(islice(reversed(shard), grown))), maxlen=0)
                self.discard(done)
                return False
            self.count += grown
            done.append((s, part))
        return True

    def add(self, parts: list[tuple[int, Sequence[bytes]]]) -> int:
        """Add the keys; returns how many were not there."""
        before = self.count
        for s, part in parts:
            shard = self.shards[s]
            self.count -= len(shard)
            shard.update(dict.fromkeys(part))
            self.count += len(shard)
        return self.count - before

    def discard(self, parts: list[tuple[int, Sequence[bytes]]]) -> None:
        """Take the keys out (those there), iterating in C."""
        for s, part in parts:
            shard = self.shards[s]
            self.count -= len(shard)
            deque(map(shard.pop, part, repeat(None)), maxlen=0)
            self.count += len(shard)

    def seen(self, parts: list[tuple[int, Sequence[bytes]]]) -> set[bytes]:
        """The keys that are there."""
        out: set[bytes] = set()
        for s, part in parts:
            out |= self.shards[s].keys() & set(part)
        return out


class IdSets:
    """Per-round sets of stored message ids (16-byte keys), with a
    transaction's additions kept apart until it commits."""

    def __init__(self, budget: int = ID_BUDGET) -> None:
        if budget < 1:
            raise ValueError(f"the id budget must be >= 1, got {budget}")
        self.budget = budget
        self._sets: OrderedDict[int, _RoundIds] = OrderedDict()  # least recently written first
        self._added: list[tuple[int, list[bytes]]] = []  # the open transaction's new ids, by round
        self._too_large: set[int] = set()  # rounds past the budget: no set

    def held(self) -> int:
        """Ids held in all (committed sets)."""
        return sum(s.count for s in self._sets.values())

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
            self._sets[seq] = _RoundIds(ids.tolist())
            self._shrink(keep=seq)
        return True

    def fresh(self, seq: int, keys: list[bytes]) -> NDArray[np.bool_] | None:
        """Which of ``keys`` are new to the round's loaded set: not stored, not
        added earlier in this transaction, not repeated earlier in ``keys``
        (None: all of them). They join the set at once, and leave it again if
        the transaction rolls back. Without duplicates (the common case) one
        C-level pass over each shard's keys (``add_all_new``); with them, numpy
        over the batch."""
        base = self._sets[seq]
        parts = _shard_slices(keys)
        if base.add_all_new(parts):
            self._added.append((seq, keys))
            return None
        arr = np.array(keys, dtype="S16")  # fixed-width bytes compare whole (every key is 16 bytes)
        mask = np.zeros(len(keys), dtype=bool)
        mask[np.unique(arr, return_index=True)[1]] = True  # first occurrences
        seen = base.seen(parts)
        if seen:
            mask &= ~np.isin(arr, np.array(sorted(seen), dtype="S16"))
        new = np.array(keys, dtype=object)[mask].tolist()
        base.add(_shard_slices(new))
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
                self._sets[seq].discard(_shard_slices(keys))
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
        if keep in self._sets and self._sets[keep].count > self.budget:
            self._sets.pop(keep)
            self._too_large.add(keep)
        total = self.held()
        for seq in list(self._sets):
            if total <= self.budget:
                break
            if seq != keep:
                total -= self._sets.pop(seq).count
