"""The storage half shared by kinds whose devices send only shuffled
secure-sum shares (refine, elbow and partition rounds): which messages they
take, how shares become stored rows, and the accumulator that decodes them;
and the privacy statement of a round opened on a parent (``child_privacy``,
over ``family_composition``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.kinds import config_kinds
from shoal.common.privacy.accounting import central_guarantee
from shoal.common.privacy.events import RoundsEvent
from shoal.common.privacy.threats import secure_sum_guarantee
from shoal.common.wire.models import ShareMessage, share_array
from shoal.server.decoders.shares import ShareTotal
from shoal.server.rounds.kinds.base import RoundsView, Storage


class SharesOnly:
    """Mixed into a server kind whose config has ``round_id`` and ``secure_sum``."""

    storage: Storage = "payloads"
    decode_draws_noise = False  # the noise is in the devices' shares: a decode is post-processing
    what = "a secure-sum round"  # how the refusal of a direct report names the round

    def direct_model(self, config: Any) -> type[BaseModel] | str:
        return f"round {config.round_id} is {self.what}: it takes only shuffled secure-sum shares"

    def sealed_model(self, config: Any) -> type[BaseModel] | str:
        return ShareMessage

    def rows(self, config: Any, messages: Sequence[BaseModel]) -> NDArray[np.uint64]:
        return share_array([m for m in messages if isinstance(m, ShareMessage)], config.secure_sum)

    def row_width(self, config: Any) -> tuple[int, type[np.uint64] | type[np.float64]]:
        return config.secure_sum.length + 1, np.uint64

    def accumulator(self, config: Any) -> ShareTotal:
        return ShareTotal(config.secure_sum)


def family_root(round_id: str, rounds: RoundsView) -> str:
    """The first round of ``round_id``'s family: its parent's parent and so on (a refine
    round opens on a refine round, issue 41: the partition stage's refine chain)."""
    seen = {round_id}
    while (parent := rounds.parent_of(round_id)) is not None:
        if parent in seen:
            raise RuntimeError(f"round {round_id}'s parents form a cycle")
        seen.add(parent)
        round_id = parent
    return round_id


def descendants(root: str, opened_on: Mapping[str, list[tuple[str, str, Any]]]) -> list[tuple[str, str, Any]]:
    """(round id, kind, parsed config) of every round opened on ``root`` or on one of
    those, each after its parent, siblings in round-id order; ``opened_on`` is
    ``RoundsView.opened_on()`` (one read of the rounds for the whole walk)."""
    out: list[tuple[str, str, Any]] = []
    todo = [root]
    while todo:
        level = [child for rid in todo for child in opened_on.get(rid, [])]
        out += level
        todo = [rid for rid, _, _ in level]
    return out


def family_composition(root_id: str, rounds: RoundsView,
                       opened_on: Mapping[str, list[tuple[str, str, Any]]] | None = None) -> dict[str, Any]:
    """Basic composition (zCDP for the discrete-Gaussian secure sums among them
    when smaller, ``accounting.central_guarantee``) over a first round and every round opened on it,
    or on one of those, so far (``descendants``), whatever its kind (issue 12: an elbow and a refine
    round on one parent ask the same devices twice; a refine chain asks them once per round; a local
    refine child asks fresh devices, so counting it is conservative): the composed (eps, delta), the
    kinds, and one row per round (the first round's own statement first). "parent" names the first round.
    ``opened_on``: ``rounds.opened_on()`` when the caller has read it already."""
    parent_event, parent_privacy = rounds.privacy_of(root_id)
    children = descendants(root_id, rounds.opened_on() if opened_on is None else opened_on)
    events = [config_kinds()[kind].event(c) for _, kind, c in children]
    eps, delta = central_guarantee(RoundsEvent((parent_event, *events)))
    kinds = sorted({kind for _, kind, _ in children})
    rows = []
    for (rid, kind, c), event in zip(children, events, strict=True):
        c_eps, c_delta = central_guarantee(event)
        row: dict[str, Any] = {"round": rid, "kind": kind, "parent": c.parent_id, "central_epsilon": c_eps,
                               "delta": c_delta}
        if hasattr(c, "secure_sum"):
            row.update(min_devices=c.secure_sum.min_devices, shares_per_device=c.secure_sum.shares,
                       noise=c.secure_sum.noise)
        rows.append(row)
    return {
        "parent": root_id,
        "central_epsilon": eps,
        "delta": delta,
        "composition": f"basic (discrete-Gaussian secure sums among them in zCDP where that is smaller), over the "
                       f"first round and all {len(children)} round(s) opened on it or on one of those "
                       f"({', '.join(kinds)})",
        "rounds": [parent_privacy] + rows,
    }


def child_privacy(config: Any, rounds: RoundsView, family: dict[str, Any] | None = None) -> dict[str, Any]:
    """The statement of a secure-sum round opened on a parent (refine, elbow):
    ``family_composition`` over its family's first round and every round opened
    in the family. Stored at decode time and re-issued whenever the result is
    read (``server/rounds/statements.py``, issue 45), so it also composes the
    rounds opened after the decode. ``family``: that composition, when the caller has it."""
    params = config.secure_sum
    if family is None:
        family = family_composition(family_root(config.parent_id, rounds), rounds)
    eps, delta = family["central_epsilon"], family["delta"]
    return {
        "model": "shuffle",
        "mechanism": f"secure summation (split-and-mix) with distributed discrete {params.noise.capitalize()} noise"
                     + (" (Kairouz-Liu-Steinke zCDP, Canonne-Kamath-Steinke conversion)" if params.noise == "gaussian" else ""),
        "central_epsilon": eps,
        "delta": delta,
        "composition": family["composition"],
        "device_epsilon": None,
        "device_epsilon_note": "no local guarantee for this round: its privacy relies on the shuffler not colluding with the server",
        "guarantees": [secure_sum_guarantee(eps, delta, params.min_devices)],
        "rounds": family["rounds"],
    }
