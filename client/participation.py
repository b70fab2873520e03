"""What every kind's device half needs to take part in a round: the round's
verified public facts (id, the key to seal to, the config digest) and the
device owner's policy (shuffler, consent to secure-sum rounds, pinned key).

Kept apart from ``device.py`` (the HTTP client) so that the kind modules in
``client/kinds/`` build messages without knowing how they are sent.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shoal.client.ledger import Spend
from shoal.common.errors import PrivacyError, ShoalError
from shoal.common.wire.envelope import seal
from shoal.common.wire.signing import TrustError

if TYPE_CHECKING:  # a device that joins no secure-sum round never loads these (issue 45, Build 5)
    from shoal.common.mechanisms.secure_sum import SecureSumParams


class TransportError(ShoalError):
    """The server could not be reached or refused the message."""


@dataclass(frozen=True)
class Participation:
    """One device answering one round."""

    round_id: str
    server_public_key: bytes  # X25519, from the (verified) config
    config_digest: str
    shuffler_url: str | None
    pinned: bool  # the server's identity key is pinned and the config's signature checked
    allow_no_local_guarantee: bool

    def need_shuffler(self, what: str) -> None:
        if not self.shuffler_url:
            raise TransportError(f"round {self.round_id} is a {what} round: this device needs a shuffler_url")

    def need_pin(self, what: str) -> None:
        if not self.pinned:
            raise TrustError(
                f"round {self.round_id} is a {what} round: pin the server's key (Device(server_key=...) or "
                "SHOAL_SERVER_KEY); without it a hostile server could give this device a key of its own and "
                "link its message to it"
            )

    def sealed(self, message: str) -> str:
        """``message`` sealed to the server and bound to the round (the shuffler cannot read it)."""
        box = seal(message.encode(), self.server_public_key, self.round_id)
        return json.dumps({"sealed": base64.b64encode(box).decode(), "config_digest": self.config_digest})

    def secure_sum_spend(self, params: SecureSumParams) -> Spend:
        """Secure-sum rounds: no local guarantee; only with the owner's consent."""
        self.need_shuffler("secure-sum")
        self.need_pin("secure-sum")
        if not self.allow_no_local_guarantee:
            raise PrivacyError(
                f"round {self.round_id} is a secure-sum round: this device's shares carry no local DP guarantee "
                f"(central eps={params.epsilon:g}, delta={params.delta:g} hold only if the shuffler does not "
                "collude with the server); take part only with the owner's consent: "
                "Device(..., allow_no_local_guarantee=True) or 'shoal client report --allow-no-local-guarantee'"
            )
        return Spend("none", 0.0, central_epsilon=params.epsilon, delta=params.delta,
                     note="secure sum: no local guarantee")

    def curator_spend(self, kind: str, eps: float, delta: float, sees: str, note: str, ledger: str = "") -> Spend:
        """Curator rounds (central, continual): the server sees ``sees`` (the raw
        point or points), so there is no local guarantee and (eps, delta) hold
        only for what the server releases; only with the owner's consent, through
        a shuffler, to a pinned key. ``ledger`` is added to the ledger's note."""
        self.need_shuffler(kind)
        self.need_pin(kind)
        if not self.allow_no_local_guarantee:
            raise PrivacyError(
                f"round {self.round_id} is a {kind} round: the server sees {sees} "
                f"({note} eps={eps:g}, delta={delta:g} hold only for what it releases); take part only "
                "with the owner's consent: Device(..., allow_no_local_guarantee=True) or "
                "'shoal client report --allow-no-local-guarantee'")
        return Spend("none", 0.0, central_epsilon=eps, delta=delta,
                     note=f"{kind} model: the server (curator) sees {sees}; no local guarantee{ledger}")

    def secure_sum_message(self, shares: np.ndarray) -> str:
        """This device's shares (1, s, L + 1), each sealed on its own, as one submission for the shuffler."""
        from shoal.common.wire.messages import sealed_share_parts, submission_json

        parts = sealed_share_parts(shares, self.server_public_key, self.round_id)[0]
        return submission_json(parts, self.config_digest)
