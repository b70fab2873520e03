"""The edge device: fetch a round's config, check the ledger, encode once, send.

httpx only (a device never imports fastapi). Transport failures are retried
with exponential backoff and always resend the *same* message (same
message id), which the server acknowledges but never counts twice. httpx
errors are mapped to :class:`TransportError` here, at the boundary.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import numpy as np

from shoal.client.encoder import encode
from shoal.client.ledger import Ledger
from shoal.common.config import RoundConfig, config_from_dict
from shoal.common.errors import ShoalError


class TransportError(ShoalError):
    """The server could not be reached or refused the message."""


class Device:
    def __init__(
        self,
        server_url: str,
        ledger_path: Path | str,
        cap: float = 10.0,
        retries: int = 5,
        backoff: float = 0.2,
        client: httpx.Client | None = None,
    ) -> None:
        self.server_url = server_url.rstrip("/")
        self.ledger = Ledger(ledger_path, cap)
        self.retries = retries
        self.backoff = backoff
        self.http = client or httpx.Client(timeout=30)

    def fetch_config(self, round_id: str) -> RoundConfig:
        r = self._request("GET", f"/rounds/{round_id}/config")
        return config_from_dict(r.json()["config"])

    def participate(self, round_id: str, point: np.ndarray | list[float]) -> dict[str, int]:
        """Encode ``point`` for the round (once, ever) and deliver it."""
        message = self.ledger.message_for(round_id)
        if message is None:
            cfg = self.fetch_config(round_id)
            if cfg.model != "local":
                raise TransportError(f"round model {cfg.model!r} is not supported by this client yet")
            message = encode(np.asarray(point, dtype=np.float64), cfg).model_dump_json()
            self.ledger.charge(round_id, cfg.device_epsilon, message)
        r = self._request("POST", f"/rounds/{round_id}/reports", content=message.encode(),
                          headers={"content-type": "application/json"})
        out: dict[str, int] = r.json()
        return out

    def _request(self, method: str, path: str, **kw: object) -> httpx.Response:
        delay = self.backoff
        last: str = ""
        for attempt in range(self.retries + 1):
            try:
                r = self.http.request(method, self.server_url + path, **kw)  # type: ignore[arg-type]
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
