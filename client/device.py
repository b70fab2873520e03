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
from typing import Any

import httpx
import numpy as np

from shoal.client.encoder import device_rng, encode
from shoal.client.ledger import Ledger, Spend
from shoal.client.sketch_encoder import sketch_messages, sketch_shares
from shoal.common.config import RoundConfig, config_from_dict
from shoal.common.envelope import seal
from shoal.common.errors import ConfigError, PrivacyError, ShoalError
from shoal.common.messages import sealed_share_parts
from shoal.common.refine import contributions, is_refine, refine_from_dict
from shoal.common.secure_sum import SecureSumParams, encode_devices
from shoal.common.signing import TrustError, config_digest, pinned_key, verify_config
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
        allow_no_local_guarantee: bool = False,
        server_key: str | None = None,
    ) -> None:
        """``shuffler_url`` is needed for shuffle-model rounds; ``device_token``,
        issued by the shuffler's operator (``POST /enrol``), identifies this
        device to the shuffler only (one message per round);
        ``allow_no_local_guarantee``: the owner's consent to secure-sum rounds
        (refine, shuffle-model sketches), whose shares have no local guarantee;
        ``server_key``: the server identity's fingerprint, given out of band
        (else ``SHOAL_SERVER_KEY``): configs must carry its valid signature,
        and shuffle-model or secure-sum rounds are refused without one."""
        self.server_url = server_url.rstrip("/")
        self.shuffler_url = shuffler_url.rstrip("/") if shuffler_url else None
        self.device_token = device_token
        self.ledger = Ledger(ledger_path, cap)
        self.allow_no_local_guarantee = allow_no_local_guarantee
        self.server_key = pinned_key(server_key)
        self.retries = retries
        self.backoff = backoff
        self.http = client or httpx.Client(timeout=30)

    def fetch_config(self, round_id: str) -> RoundConfig:
        return self._fetch(round_id)[0]

    def _fetch(self, round_id: str) -> tuple[RoundConfig, bytes]:
        """The round's config (re-validated here, including a shuffle round's
        amplification claim) and the server's public key."""
        config, key, _ = self._verified(round_id)
        return config_from_dict(config), key

    def _verified(self, round_id: str) -> tuple[dict[str, Any], bytes, str]:
        """The round's config, the X25519 key to seal to, and the config's digest;
        checked against the pinned server key when there is one."""
        body = self._request("GET", f"/rounds/{round_id}/config").json()
        if self.server_key is not None:
            v = verify_config(body, round_id, self.server_key)
            return v.config, v.server_public_key, v.digest
        return (dict(body["config"]), base64.b64decode(body["server_public_key"]),
                config_digest(body["config"], body["server_public_key"]))

    def _need_pin(self, round_id: str, what: str) -> None:
        if self.server_key is None:
            raise TrustError(
                f"round {round_id} is a {what} round: pin the server's key (Device(server_key=...) or "
                "SHOAL_SERVER_KEY); without it a hostile server could give this device a key of its own and "
                "link its message to it"
            )

    def participate(self, round_id: str, point: np.ndarray | list[float]) -> dict[str, int]:
        """Encode ``point`` for the round (once, ever, across processes sharing
        the ledger) and deliver it. In a local-model sketch round ``point`` may
        also be the device's (n0, d) records: one sketch summarises them all."""
        message = self.ledger.message_for(round_id)
        if message is None:
            config, key, digest = self._verified(round_id)
            spend, make = self._plan(round_id, config, key, digest, np.asarray(point, dtype=np.float64))
            message = self.ledger.record(round_id, spend, make)
        if message.startswith(('{"sealed"', '{"parts"')):
            if not self.shuffler_url:
                raise TransportError(f"a sealed message for round {round_id} needs a shuffler_url")
            if not self.device_token:
                raise TransportError(f"round {round_id} goes through the shuffler: this device needs a token the "
                                     "operator enrolled there (Device(device_token=...), POST /enrol on the shuffler)")
            r = self._request("POST", f"/rounds/{round_id}/messages", base=self.shuffler_url, content=message.encode(),
                              headers={"content-type": "application/json", "X-Device-Token": self.device_token})
        else:
            r = self._request("POST", f"/rounds/{round_id}/reports", content=message.encode(),
                              headers={"content-type": "application/json"})
        out: dict[str, int] = r.json()
        return out

    def _plan(self, round_id: str, config: dict[str, Any], key: bytes, digest: str,
              x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        """What answering this round costs and how its message is built (the
        ledger calls the builder under its lock, at most once per round)."""
        if is_refine(config):
            refine = refine_from_dict(config)
            spend = self._secure_sum_spend(round_id, refine.secure_sum)
            return spend, lambda: self._secure_sum_message(
                round_id, encode_devices(contributions(x.reshape(1, -1), refine), refine.secure_sum, device_rng()),
                key, digest)
        if is_sketch(config):
            return self._sketch_plan(round_id, sketch_round_from_dict(config), key, digest, x)
        cfg = config_from_dict(config)
        if cfg.model == "shuffle":
            if not self.shuffler_url:
                raise TransportError(f"round {round_id} is a shuffle-model round: this device needs a shuffler_url")
            self._need_pin(round_id, "shuffle-model")

        def make() -> str:
            message = encode(x, cfg).model_dump_json()
            if cfg.model != "shuffle":
                return message
            # Sealed to the server, bound to the round: the shuffler cannot read it.
            return json.dumps({"sealed": base64.b64encode(seal(message.encode(), key, round_id)).decode(),
                               "config_digest": digest})

        # The local epsilon: the guarantee that holds even if the shuffler and the server collude.
        return Spend("local", cfg.device_epsilon, note=f"{cfg.model} tree round"), make

    def _secure_sum_spend(self, round_id: str, params: SecureSumParams) -> Spend:
        """Secure-sum rounds: no local guarantee; only with the owner's consent."""
        if not self.shuffler_url:
            raise TransportError(f"round {round_id} is a secure-sum round: this device needs a shuffler_url")
        self._need_pin(round_id, "secure-sum")
        if not self.allow_no_local_guarantee:
            raise PrivacyError(
                f"round {round_id} is a secure-sum round: this device's shares carry no local DP guarantee "
                f"(central eps={params.epsilon:g}, delta={params.delta:g} hold only if the shuffler does not "
                "collude with the server); take part only with the owner's consent: "
                "Device(..., allow_no_local_guarantee=True) or 'shoal client report --allow-no-local-guarantee'"
            )
        return Spend("none", 0.0, central_epsilon=params.epsilon, delta=params.delta,
                     note="secure sum: no local guarantee")

    def _secure_sum_message(self, round_id: str, shares: np.ndarray, key: bytes, digest: str) -> str:
        """This device's shares (1, s, L + 1), each sealed on its own, as one submission for the shuffler."""
        return json.dumps({"parts": sealed_share_parts(shares, key, round_id)[0], "config_digest": digest})

    def _sketch_plan(self, round_id: str, cfg: SketchRoundConfig, key: bytes, digest: str,
                     x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        """A sketch round: local model, one scrambled sketch of the device's
        n0 records, charged n0 eps (eps holds per record; the device's user
        may own all n0, and group privacy gives n0 eps); shuffle model, the
        one record's features through secure summation via the shuffler."""
        x = x.reshape(1, -1) if x.ndim == 1 else x
        if cfg.secure_sum is None:
            n0 = x.shape[0]
            spend = Spend("local", n0 * cfg.sketch.epsilon,
                          note=f"sketch of {n0} records: eps {cfg.sketch.epsilon:g} per record, {n0} x for the user")
            return spend, lambda: sketch_messages(x, np.array([n0]), cfg)[0].model_dump_json()
        if x.shape[0] != 1:
            raise ConfigError(f"a shuffle-model sketch round takes one record per device, got {x.shape[0]}")
        params = cfg.secure_sum
        spend = self._secure_sum_spend(round_id, params)
        return spend, lambda: self._secure_sum_message(round_id, sketch_shares(x, cfg), key, digest)

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
