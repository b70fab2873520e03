"""A round's privacy numbers as the edge shows them: the ``privacy`` summary of
``GET /rounds`` and ``GET /rounds/{id}`` (``api_models.RoundOut``) and the
dashboard's round pages (``dashboard/view.py``) read them from here, so both
say the same thing.

The numbers come from the round kind's own privacy statement (the decoded
result's, or the kind registry's, as ``RoundService.privacy_of`` gives it), never
from config fields, whose meaning differs by kind: a shuffle tree round's
config ``epsilon`` is the device's amplified eps0, not the central epsilon the
operator asked for (issue 39). Nothing here switches on config types.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from shoal.common.errors import ShoalError
from shoal.common.kinds import config_kinds, kind_name, parse_config
from shoal.common.privacy.accounting import central_guarantee
from shoal.server.rounds.kinds import server_kind
from shoal.server.storage.store import RoundRow


def number(value: Any) -> float | None:
    """A finite number, or None (a missing, null, non-numeric or infinite field)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt(value: float) -> str:
    return f"{value:.4g}"


@dataclass(frozen=True)
class RoundPrivacy:
    """A round's privacy numbers.

    ``epsilon``/``delta``: the guarantee of this round's own release (central
    in the shuffle and central models, the device's in the local model, where
    delta does not apply and is None). ``device_epsilon``: what one device's
    message reveals if the shuffler colludes (shuffle rounds whose devices
    randomise: the amplified eps0); None where there is none or it equals
    ``epsilon``. ``composed``: the guarantee of a round opened on a parent,
    composed with the parent and every round opened on it."""

    model: str
    epsilon: float | None
    delta: float | None
    device_epsilon: float | None
    composed: tuple[float | None, float | None] | None

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) rows for a table, only those that apply to the model."""
        out = [("epsilon", "n/a" if self.epsilon is None else _fmt(self.epsilon))]
        if self.delta is not None:
            out.append(("delta", f"{self.delta:g}"))
        if self.device_epsilon is not None:
            out.append(("device epsilon", _fmt(self.device_epsilon)))
        if self.composed is not None:
            eps, delta = self.composed
            words = "n/a" if eps is None else _fmt(eps)
            if delta is not None and self.model != "local":
                words += f", delta {delta:g}"
            out.append(("with its parent", words))
        return out

    def summary(self) -> dict[str, Any]:
        """The API's summary (``api_models.RoundPrivacyOut``): model and epsilon
        always; delta and device_epsilon only where they apply."""
        out: dict[str, Any] = {"model": self.model, "epsilon": self.epsilon}
        if self.delta is not None:
            out["delta"] = self.delta
        if self.device_epsilon is not None:
            out["device_epsilon"] = self.device_epsilon
        return out


@lru_cache(maxsize=4096)
def _kind_statement(config_json: str) -> dict[str, Any]:
    """The statement the round's kind makes from its published config alone
    (``ServerKind.privacy``, what ``RoundService.privacy_of`` returns), or its
    own event's guarantee for a round opened on a parent (whose kind states
    one only when decoded). Cached by config: every kind's statement is a
    function of the config, and a shuffle round's takes ~15 ms (the numerical
    amplification bound), too slow to redo for each of a listing's 100 rounds
    or each device's state poll (``GET /rounds/{id}``). Read-only."""
    data = json.loads(config_json)
    try:
        return server_kind(kind_name(data)).privacy(parse_config(data))[1]
    except ShoalError:
        pass
    try:
        eps, delta = central_guarantee(config_kinds()[kind_name(data)].event(parse_config(data)))
    except ShoalError:
        return {}
    return {"central_epsilon": eps, "delta": delta}


def _statement(row: RoundRow) -> dict[str, Any]:
    """The round's privacy statement: its decoded result's (a round opened on a
    parent composes its own when decoded), else its kind's."""
    stated = (row.result or {}).get("privacy") if isinstance(row.result, dict) else None
    if isinstance(stated, dict):
        return stated
    return _kind_statement(json.dumps(row.config, sort_keys=True))


def round_privacy(row: RoundRow) -> RoundPrivacy:
    """The privacy numbers of ``row`` (``RoundPrivacy``), from its kind's statement."""
    st = _statement(row)
    model = str(st.get("model") or row.config.get("model") or (row.config.get("spec") and "central") or "")
    own = next((r for r in st.get("rounds") or [] if isinstance(r, dict) and r.get("round") == row.id), None)
    composed = None
    if own is not None:
        eps = number(own.get("central_epsilon", own.get("device_epsilon")))
        delta = number(own.get("delta"))
        composed = (number(st.get("central_epsilon")), number(st.get("delta")))
    else:
        eps, delta = number(st.get("central_epsilon")), number(st.get("delta"))
    device = number(st.get("device_epsilon"))
    if model == "local":
        eps = device if eps is None else eps
        delta, device = None, None
    elif device is not None and eps is not None and abs(device - eps) <= 1e-12 * max(1.0, eps):
        device = None
    return RoundPrivacy(model, eps, delta, device, composed)
