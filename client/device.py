"""The edge device: fetch a round's config, check the ledger, encode once, send.

httpx only (a device never imports fastapi). Transport failures are retried
with exponential backoff and always resend the *same* message (same
message id), which the server acknowledges but never counts twice. httpx
errors are mapped to :class:`TransportError` here, at the boundary.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path

import httpx
import numpy as np

from shoal.client.encoder import device_rng, encode
from shoal.client.ledger import Ledger
from shoal.client.sketch_encoder import sketch_messages, sketch_shares
from shoal.common.config import RoundConfig, config_from_dict
from shoal.common.envelope import seal
from shoal.common.errors import ConfigError, ShoalError
from shoal.common.messages import sealed_share_parts
from shoal.common.refine import RefineConfig, contributions, is_refine, refine_from_dict
from shoal.common.secure_sum import encode_devices
from shoal.common.sketch_round import SketchRoundConfig, is_sketch, sketch_round_from_dict


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
        shuffler_url: str | None = None,
        device_token: str | None = None,
    ) -> None:
        """``shuffler_url`` is needed for shuffle-model rounds; ``device_token``
        identifies this device to the shuffler only (one message per round)."""
        self.server_url = server_url.rstrip("/")
        self.shuffler_url = shuffler_url.rstrip("/") if shuffler_url else None
        self.device_token = device_token or secrets.token_hex(16)
        self.ledger = Ledger(ledger_path, cap)
        self.retries = retries
        self.backoff = backoff
        self.http = client or httpx.Client(timeout=30)

    def fetch_config(self, round_id: str) -> RoundConfig:
        return self._fetch(round_id)[0]

    def _fetch(self, round_id: str) -> tuple[RoundConfig, bytes]:
        """The round's config (re-validated here, including a shuffle round's
        amplification claim) and the server's public key."""
        body = self._request("GET", f"/rounds/{round_id}/config").json()
        return config_from_dict(body["config"]), base64.b64decode(body["server_public_key"])

    def participate(self, round_id: str, point: np.ndarray | list[float]) -> dict[str, int]:
        """Encode ``point`` for the round (once, ever) and deliver it. In a
        local-model sketch round ``point`` may also be the device's (n0, d)
        records: one sketch summarises them all."""
        message = self.ledger.message_for(round_id)
        if message is None:
            body = self._request("GET", f"/rounds/{round_id}/config").json()
            key = base64.b64decode(body["server_public_key"])
            if is_refine(body["config"]):
                message = self._refine_message(round_id, refine_from_dict(body["config"]), key, point)
            elif is_sketch(body["config"]):
                message = self._sketch_message(round_id, sketch_round_from_dict(body["config"]), key, point)
        if message is None:
            cfg, key = self._fetch(round_id)
            if cfg.model == "shuffle" and not self.shuffler_url:
                raise TransportError(f"round {round_id} is a shuffle-model round: this device needs a shuffler_url")
            message = encode(np.asarray(point, dtype=np.float64), cfg).model_dump_json()
            if cfg.model == "shuffle":
                # Sealed to the server, bound to the round: the shuffler cannot read it.
                message = json.dumps({"sealed": base64.b64encode(seal(message.encode(), key, round_id)).decode()})
            # The ledger charges the local epsilon: the guarantee that holds even
            # if the shuffler and the server collude.
            self.ledger.charge(round_id, cfg.device_epsilon, message)
        if message.startswith(('{"sealed"', '{"parts"')):
            if not self.shuffler_url:
                raise TransportError(f"a sealed message for round {round_id} needs a shuffler_url")
            r = self._request("POST", f"/rounds/{round_id}/messages", base=self.shuffler_url, content=message.encode(),
                              headers={"content-type": "application/json", "X-Device-Token": self.device_token})
        else:
            r = self._request("POST", f"/rounds/{round_id}/reports", content=message.encode(),
                              headers={"content-type": "application/json"})
        out: dict[str, int] = r.json()
        return out

    def _refine_message(self, round_id: str, cfg: RefineConfig, key: bytes, point: np.ndarray | list[float]) -> str:
        """A refine round: contribute (point, 1) to the nearest published center
        through secure summation; each share sealed on its own, all sent via the
        shuffler in one submission. The ledger charges the round's central eps
        (this round has no local guarantee: see ``SecureSumEvent``)."""
        self._need_shuffler(round_id)
        x = np.asarray(point, dtype=np.float64).reshape(1, -1)
        shares = encode_devices(contributions(x, cfg), cfg.secure_sum, device_rng())
        return self._secure_sum_message(round_id, shares, key, cfg.secure_sum.epsilon)

    def _need_shuffler(self, round_id: str) -> None:
        if not self.shuffler_url:
            raise TransportError(f"round {round_id} is a secure-sum round: this device needs a shuffler_url")

    def _secure_sum_message(self, round_id: str, shares: np.ndarray, key: bytes, epsilon: float) -> str:
        """This device's shares (1, s, L + 1), each sealed on its own, as one
        submission for the shuffler; the ledger is charged ``epsilon`` first."""
        message = json.dumps({"parts": sealed_share_parts(shares, key, round_id)[0]})
        self.ledger.charge(round_id, epsilon, message)
        return message

    def _sketch_message(self, round_id: str, cfg: SketchRoundConfig, key: bytes,
                        points: np.ndarray | list[float]) -> str:
        """A sketch round: local model, one scrambled sketch of the device's
        records (charged its local eps); shuffle model, the one record's
        features through secure summation via the shuffler (charged the
        round's central eps, as a refine round)."""
        x = np.asarray(points, dtype=np.float64)
        x = x.reshape(1, -1) if x.ndim == 1 else x
        if cfg.secure_sum is None:
            message = sketch_messages(x, np.array([x.shape[0]]), cfg)[0].model_dump_json()
            self.ledger.charge(round_id, cfg.sketch.epsilon, message)
            return message
        self._need_shuffler(round_id)
        if x.shape[0] != 1:
            raise ConfigError(f"a shuffle-model sketch round takes one record per device, got {x.shape[0]}")
        return self._secure_sum_message(round_id, sketch_shares(x, cfg), key, cfg.secure_sum.epsilon)

    def _request(self, method: str, path: str, base: str | None = None, **kw: object) -> httpx.Response:
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
