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
        self.reads = 0  # calls of opened_on: each reads every round of the store

    def parent_of(self, round_id: str) -> str | None:
        return self.parents[round_id]

    def opened_on(self) -> dict[str, list[tuple[str, str, Any]]]:
        self.reads += 1
        out: dict[str, list[tuple[str, str, Any]]] = {}
        for rid, p in sorted(self.parents.items()):
            if p is not None:
                out.setdefault(p, []).append((rid, "refine", SimpleNamespace(parent_id=p)))
        return out

    def privacy_of(self, round_id: str) -> tuple[object, dict[str, Any]]:
        raise AssertionError("not asked")


CHAIN = Rounds({"a": None, "b": "a", "c": "b", "d": "c", "e": "a", "z": None})


@pytest.mark.parametrize("member", ["a", "b", "c", "d", "e"])
def test_every_member_of_a_chain_finds_the_same_first_round(member):
    assert family_root(member, CHAIN) == "a"


def test_a_first_round_is_its_own_family_root():
    assert family_root("z", CHAIN) == "z" and descendants("z", CHAIN.opened_on()) == []


def test_the_family_holds_every_round_opened_in_it_each_after_its_parent():
    got = [rid for rid, _, _ in descendants("a", CHAIN.opened_on())]
    assert got == ["b", "e", "c", "d"]  # level by level, siblings in round-id order


def test_a_cycle_of_parents_is_refused():
    with pytest.raises(RuntimeError, match="cycle"):
        family_root("x", Rounds({"x": "y", "y": "x"}))


def test_a_chain_members_live_statement_reads_the_rounds_once(tmp_path, monkeypatch):
    """A statement re-composed at read time (server/rounds/statements.py) reads the rounds table
    once, however deep the chain: every member's statement composes the whole family."""
    import numpy as np

    from shoal.common.bounds import PublicBound
    from shoal.common.kinds import dump_config
    from shoal.common.kinds.refine import derive_refine
    from shoal.common.kinds.tree import derive_config
    from shoal.server.rounds.service import RoundService, RoundsSettings
    from shoal.server.rounds.statements import with_live_statement

    service = RoundService(RoundsSettings(db_url=f"sqlite:///{tmp_path}/r.db", key_path=str(tmp_path / "k.pem")))
    service.store.create_round("a", dump_config("tree", derive_config(10_000, 3, 4, 4.0)))
    centers, bound = np.eye(3)[:2] * 0.5, PublicBound(radius=2.0)
    for rid, parent in (("b", "a"), ("c", "b"), ("d", "c"), ("e", "d")):
        service.store.create_round(rid, dump_config("refine", derive_refine(parent, centers, bound, 0.5, 1e-8, 100,
                                                                           round_id=rid)))
    reads = []
    list_rounds = service.store.list_rounds
    monkeypatch.setattr(service.store, "list_rounds", lambda: reads.append(1) or list_rounds())
    for member in "abcde":
        reads.clear()
        privacy = with_live_statement({"privacy": {}}, member, service)["privacy"]
        assert [row["round"] for row in privacy["composed"]["rounds"][1:]] == list("bcde")
        assert privacy["composed"]["central_epsilon"] == pytest.approx(4.0 + 4 * 0.5)
        assert len(reads) == 1, member
