"""Privacy statements read live (issue 45, item 2).

A round opened on a parent (refine, elbow, local refine) asks the parent's
devices again, so the guarantee those devices have is the composition over
the parent and *every* round opened on it. A result is written once, at
decode (``service.result`` returns it as stored), so a statement composed
then misses the rounds opened afterwards, and the parent's own result never
showed its children. ``with_live_statement`` re-composes at read time:

- every member of a family (the first round and each round opened on it, or
  on one of those: a refine chain, issue 41) gets a ``composed`` section in
  its ``privacy``: the first round, every round of the family now, and the
  composed (eps, delta) (``shares.family_composition``: basic composition,
  zCDP among Gaussian sums); the first round's own statement stays as it is;
- a secure-sum child (refine, elbow), whose whole statement *is* that
  composition (``shares.child_privacy``), has it re-issued now; what was
  stored at decode is kept under ``as_decoded``.

A round with no parent and no children is returned unchanged. The threat
each statement covers is unchanged: this only widens what is composed.
"""

from __future__ import annotations

from typing import Any, Protocol

from shoal.server.rounds.kinds.base import RoundsView
from shoal.server.rounds.kinds.shares import child_privacy, family_composition, family_root

READ_NOTE = ("composed when this result was read: the parent and every round opened on it so far (a round "
             "opened later is composed into every member's statement from then on)")


class StatementsView(RoundsView, Protocol):
    """``RoundsView`` and the round's own parsed config (the service has both)."""

    def round(self, round_id: str) -> tuple[Any, Any]:
        """(kind, parsed config) of a round."""
        ...


def with_live_statement(result: dict[str, Any], round_id: str, rounds: StatementsView) -> dict[str, Any]:
    """``result`` (as stored) with its privacy statement composed over every round
    opened on the same parent now (module docstring); the stored dict is not changed."""
    _, config = rounds.round(round_id)
    parent_id = getattr(config, "parent_id", None)
    opened_on = rounds.opened_on()  # the one read of the rounds this statement takes
    if parent_id is None and round_id not in opened_on:
        return result
    family = family_composition(family_root(round_id, rounds), rounds, opened_on)
    privacy = dict(result.get("privacy") or {})
    if parent_id is not None and hasattr(config, "secure_sum"):
        stored = privacy
        privacy = child_privacy(config, rounds, family)
        privacy["as_decoded"] = {k: stored.get(k) for k in ("central_epsilon", "delta", "composition")}
    privacy["composed"] = family | {"read": READ_NOTE}
    return {**result, "privacy": privacy}
