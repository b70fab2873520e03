"""A round's family (server/rounds/kinds/shares.py): its first round found through the
parents, every round opened in it at any depth (a refine chain, issue 41), each after
its parent; a cycle of parents, which the service never builds, is refused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from shoal.server.rounds.kinds.shares import descendants, family_root


class Rounds:
    """A RoundsView over a table of round id -> parent id."""

    def __init__(self, parents: dict[str, str | None]) -> None:
        self.parents = parents

    def parent_of(self, round_id: str) -> str | None:
        return self.parents[round_id]

    def children(self, parent_id: str) -> list[tuple[str, str, Any]]:
        return [(rid, "refine", SimpleNamespace(parent_id=p)) for rid, p in sorted(self.parents.items())
                if p == parent_id]

    def privacy_of(self, round_id: str) -> tuple[object, dict[str, Any]]:
        raise AssertionError("not asked")


CHAIN = Rounds({"a": None, "b": "a", "c": "b", "d": "c", "e": "a", "z": None})


@pytest.mark.parametrize("member", ["a", "b", "c", "d", "e"])
def test_every_member_of_a_chain_finds_the_same_first_round(member):
    assert family_root(member, CHAIN) == "a"


def test_a_first_round_is_its_own_family_root():
    assert family_root("z", CHAIN) == "z" and descendants("z", CHAIN) == []


def test_the_family_holds_every_round_opened_in_it_each_after_its_parent():
    got = [rid for rid, _, _ in descendants("a", CHAIN)]
    assert got == ["b", "e", "c", "d"]  # level by level, siblings in round-id order


def test_a_cycle_of_parents_is_refused():
    with pytest.raises(RuntimeError, match="cycle"):
        family_root("x", Rounds({"x": "y", "y": "x"}))
