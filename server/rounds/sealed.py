"""Opening a shuffled batch item by item (issue 13).

One poison message used to make the server refuse a whole batch, and the
shuffler re-sent it forever. Now every item that opens, parses and fits the
round is kept; the others come back as (index, reason, detail), reasons
``undecryptable``, ``malformed``, ``wrong_round`` and ``invalid``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from pydantic import BaseModel, ValidationError

from shoal.common.errors import ShoalError
from shoal.common.wire.envelope import EnvelopeError, open_sealed

RefuseReason = Literal["undecryptable", "malformed", "wrong_round", "invalid"]
Refused = tuple[int, RefuseReason, str]  # a shuffled item's index, reason category, detail


def open_items(sealed: list[str], key: X25519PrivateKey, round_id: str,
               model: type[BaseModel]) -> tuple[list[tuple[int, Any]], list[Refused]]:
    """Each base64 item opened with the server's key and parsed as ``model``."""
    kept: list[tuple[int, Any]] = []
    refused: list[Refused] = []
    for i, item in enumerate(sealed):
        try:
            raw = base64.b64decode(item, validate=True)
            msg = model.model_validate_json(open_sealed(raw, key, round_id))
        except EnvelopeError as exc:
            refused.append((i, "undecryptable", str(exc)))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            refused.append((i, "malformed", f"{where}: {first.get('msg', '')}" if where else first.get("msg", "")))
        except ValueError:
            refused.append((i, "malformed", "not base64"))
        else:
            sent_to = getattr(msg, "round_id", round_id)
            if sent_to != round_id:
                refused.append((i, "wrong_round", f"a message for round {sent_to!r}"))
            else:
                kept.append((i, msg))
    return kept, refused


def valid_part(items: list[tuple[int, Any]], convert: Callable[[list[Any]], Any],
               refused: list[Refused]) -> tuple[list[Any], Any]:
    """The messages of ``items`` that ``convert`` accepts, and their converted
    form. Converted as one batch; only if that fails (a poison message), one
    by one to name the culprits (appended to ``refused``), then the rest again."""
    msgs = [m for _, m in items]
    if not msgs:
        return [], None
    try:
        return msgs, convert(msgs)
    except ShoalError:
        pass
    good = []
    for i, m in items:
        try:
            convert([m])
        except ShoalError as exc:
            refused.append((i, "invalid", str(exc)))
        else:
            good.append(m)
    return good, (convert(good) if good else None)
