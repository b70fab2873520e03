"""The edge device: fetch a round's config, check the ledger, encode once, send.

httpx only (a device never imports fastapi). Transport failures are retried
with exponential backoff and always resend the *same* message (same
message id), which the server acknowledges but never counts twice. httpx
errors are mapped to :class:`TransportError` here, at the boundary.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.client.kinds import device_kind
from shoal.client.ledger import Ledger, Spend
from shoal.client.participation import Participation, TransportError
from shoal.common.errors import ReportError
from shoal.common.kinds import check_protocol, config_kinds, kind_name, parse_config
from shoal.common.wire.signing import config_digest, pinned_key, verify_config
from shoal.common.wire.transport import check_url

if TYPE_CHECKING:
    import httpx

__all__ = ["Device", "TransportError"]


class Device:
    def __init__(
        self,
        server_url: str,
        ledger_path: Path | str,
        cap: float = 10.0,
        retries: int = 5,
        backoff: float = 0.2,
        client: httpx.Client | None = None,
        shuffler_url: str | None = None,
        device_token: str | None = None,
        allow_no_local_guarantee: bool = False,
        server_key: str | None = None,
        binary: bool = True,
        insecure: bool = False,
    ) -> None:
        """``shuffler_url`` is needed for shuffle-model rounds; ``device_token``,
        issued by the shuffler's operator (``POST /enrol``), identifies this
        device to the shuffler only (one message per round);
        ``allow_no_local_guarantee``: the owner's consent to secure-sum rounds
        (refine, shuffle-model sketches), whose shares have no local guarantee;
        ``server_key``: the server identity's fingerprint, given out of band
        (else ``SHOAL_SERVER_KEY``): configs must carry its valid signature,
        and shuffle-model or secure-sum rounds are refused without one;
        ``binary``: send a tree report in its 42-byte binary form
        (``common/wire/binary.py``) instead of JSON;
        ``insecure``: allow plain ``http://`` to a host that is not this
        machine (else a ConfigError: tokens and reports would cross the
        network in clear; ``common/wire/transport.py``)."""
        self.server_url = check_url(server_url, "the server URL", insecure)
        self.shuffler_url = check_url(shuffler_url, "the shuffler URL", insecure) if shuffler_url else None
        self.device_token = device_token
        self.ledger = Ledger(ledger_path, cap)
        self.allow_no_local_guarantee = allow_no_local_guarantee
        self.server_key = pinned_key(server_key)
        self.retries = retries
        self.backoff = backoff
        self._http = client
        self.binary = binary

    def fetch_config(self, round_id: str) -> Any:
        """The round's config, parsed and re-validated by its kind (a shuffle
        round's amplification claim included)."""
        return parse_config(self._verified(round_id)[0])

    def _verified(self, round_id: str) -> tuple[dict[str, Any], bytes, str]:
        """The round's config, the X25519 key to seal to, and the config's digest;
        checked against the pinned server key when there is one."""
        body = self._request("GET", f"/rounds/{round_id}/config").json()
        if self.server_key is not None:
            v = verify_config(body, round_id, self.server_key)
            check_protocol(v.config)  # a round of a protocol this device does not speak: a ConfigError naming both
            return v.config, v.server_public_key, v.digest
        check_protocol(body["config"])
        return (dict(body["config"]), base64.b64decode(body["server_public_key"]),
                config_digest(body["config"], body["server_public_key"]))

    def participate(self, round_id: str, point: np.ndarray | list[float]) -> dict[str, int]:
        """Encode ``point`` for the round (once, ever, across processes sharing
        the ledger) and deliver it. In a local-model sketch round ``point`` may
        also be the device's (n0, d) records: one sketch summarises them all."""
        message = self.ledger.message_for(round_id)
        if message is None:
            # A round that takes no reports costs nothing: ask before the ledger
            # is charged (issue 16). Once a message is sent it stays charged even
            # if the server then refuses it: the server has seen it.
            state = self._request("GET", f"/rounds/{round_id}").json().get("state")
            if state != "open":
                raise TransportError(f"round {round_id} is {state}, not open: nothing was sent and nothing charged")
            config, key, digest = self._verified(round_id)
            spend, make = self._plan(round_id, config, key, digest, _checked_point(round_id, config, point))
            message = self.ledger.record(round_id, spend, make)
        return self._send(round_id, message)

    def withdraw(self, round_id: str) -> dict[str, int]:
        """Delete this device's point from a continual round's stream: the
        withdrawal sealed when the point was inserted (``client/kinds/continual.py``).
        A second withdrawal resends the same sealed bytes: the shuffler answers
        it as a duplicate and keeps it once, and the curator applies an item's
        first deletion only."""
        message = self.ledger.withdrawal_for(round_id)
        if message is None:
            raise TransportError(f"this device inserted nothing it can withdraw from round {round_id}")
        return self._send(round_id, message)

    def _send(self, round_id: str, message: str) -> dict[str, int]:
        body, where = wire_body(message, self.binary, round_id)
        if where == "shuffler":
            if not self.shuffler_url:
                raise TransportError(f"a sealed message for round {round_id} needs a shuffler_url")
            if not self.device_token:
                raise TransportError(f"round {round_id} goes through the shuffler: this device needs a token the "
                                     "operator enrolled there (Device(device_token=...), POST /enrol on the shuffler)")
            r = self._request("POST", f"/rounds/{round_id}/messages", base=self.shuffler_url, content=body,
                              headers={"content-type": "application/json", "X-Device-Token": self.device_token})
        elif where == "binary":
            from shoal.common.wire.binary import CONTENT_TYPE

            r = self._request("POST", f"/rounds/{round_id}/reports/binary", content=body,
                              headers={"content-type": CONTENT_TYPE})
        else:
            r = self._request("POST", f"/rounds/{round_id}/reports", content=body,
                              headers={"content-type": "application/json"})
        out: dict[str, int] = r.json()
        return out

    def _plan(self, round_id: str, config: dict[str, Any], key: bytes, digest: str,
              x: np.ndarray) -> tuple[Spend, Callable[[], str | tuple[str, str]]]:
        """What answering this round costs and how its message is built, as the
        round's kind says (``client/kinds/``)."""
        name = kind_name(config)
        part = Participation(round_id, key, digest, self.shuffler_url, self.server_key is not None,
                             self.allow_no_local_guarantee)
        return device_kind(name).plan(part, config_kinds()[name].parse(config), x)

    @property
    def http(self) -> httpx.Client:
        """The HTTP client, made on first use: httpx is imported then, not when
        an app imports shoal (a third of the device side's import time)."""
        if self._http is None:
            import httpx

            self._http = httpx.Client(timeout=30)
        return self._http

    def _request(self, method: str, path: str, base: str | None = None, **kw: object) -> httpx.Response:
        import httpx

        delay = self.backoff
        last: str = ""
        for attempt in range(self.retries + 1):
            try:
                r = self.http.request(method, (base or self.server_url) + path, **kw)  # type: ignore[arg-type]
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if r.status_code < 500:
                    if r.status_code >= 400:
                        raise TransportError(f"{method} {path} -> {r.status_code}: {r.text}")
                    return r
                last = f"{r.status_code}: {r.text}"
            if attempt < self.retries:
                time.sleep(delay)
                delay *= 2
        raise TransportError(f"{method} {path} failed after {self.retries + 1} attempts: {last}")


def wire_body(message: str, binary: bool = True, round_id: str = "") -> tuple[bytes, str]:
    """The bytes a recorded message is sent as, and where: "shuffler" (a sealed
    submission), "binary" (``POST /reports/binary``: a tree report's record or
    a local sketch's, ``common/wire/binary.py``) or "json" (``POST /reports``).
    With ``binary=False`` a sketch recorded in binary goes as its JSON (same message id)."""
    if message.startswith(('{"sealed"', '{"parts"')):
        return message.encode(), "shuffler"
    # wire/binary.py (and wire/messages.py's ReportBatch) loads with the first direct report, not with the
    # device: a sealed submission (shuffle, secure-sum, curator rounds) never needs it (issue 45, Build 5)
    from shoal.common.wire.binary import decode_sketch, recorded_body, tree_json_to_binary

    recorded = recorded_body(message)
    if recorded is not None:
        if binary:
            return recorded, "binary"
        fields = decode_sketch(recorded)  # the recorded message id: a retry is still counted once
        body = {"round_id": round_id, "message_id": fields["message_id"], "protocol": recorded[4],
                "sketch": fields["sketch"], "n0": fields["n0"]}
        return json.dumps(body, separators=(",", ":")).encode(), "json"
    if binary and (packed := tree_json_to_binary(message)) is not None:
        return packed, "binary"
    return message.encode(), "json"


def _checked_point(round_id: str, config: dict[str, Any], point: np.ndarray | list[float]) -> np.ndarray:
    """The device's point (or its (n0, d) records) as the round takes them, or
    a ReportError saying what is wrong, before anything is charged or sent."""
    try:
        x = np.asarray(point, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ReportError(f"round {round_id}: the point is not numbers: {exc}") from None
    dim = int(config["dim"])
    if x.ndim not in (1, 2) or x.shape[-1] != dim or x.size == 0:
        raise ReportError(f"round {round_id} takes points of dimension {dim}; this one has shape {x.shape}")
    if not np.isfinite(x).all():
        raise ReportError(f"round {round_id}: the point has non-finite coordinates")
    return x

