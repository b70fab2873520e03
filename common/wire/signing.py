"""Signed round configs: trust that does not come from the server's word alone.

Threat: a hostile server (DESIGN.md, "Privacy", threat 3) may hand each
device its own X25519 key (so it can link shuffled messages to senders) or
tell the shuffler a smaller ``min_batch`` than the devices verified. So:

- The server holds an Ed25519 identity key (``load_or_create_signing_key``,
  persisted beside its X25519 key) and signs every config it serves: the
  round id, the config, its X25519 key and the signing key itself, as
  canonical JSON under a domain-separation prefix (``signed_config``).
- Devices and the shuffler are given the identity's fingerprint out of band
  (``fingerprint``: sha256 of the raw public key; ``shoal server`` prints
  it; ``SHOAL_SERVER_KEY`` or ``Device(server_key=...)``) and accept a config
  only if the key matches the pin and the signature verifies
  (``verify_config``). Every device then seals to the same X25519 key.
- A signature does not stop equivocation (two validly signed configs for
  one round, or a validly signed per-device X25519 key). Devices therefore
  send the digest of the config and key they verified
  (``config_digest``, public, data-independent) beside each sealed message,
  and the shuffler refuses messages whose digest differs from the config it
  verified itself; it also never releases below its own configured floor.

Only ``cryptography`` primitives; its exceptions become :class:`TrustError`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from shoal.common.errors import ShoalError
from shoal.common.wire.envelope import write_secret

_DOMAIN = b"shoal signed round config v1\n"


class TrustError(ShoalError):
    """A config that does not carry the pinned server's valid signature."""


def fingerprint(public_raw: bytes) -> str:
    """The out-of-band pin of a server identity: ``sha256:`` + hex of its raw Ed25519 key."""
    return "sha256:" + hashlib.sha256(public_raw).hexdigest()


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes_raw()  # = public_bytes(Encoding.Raw, PublicFormat.Raw), without loading serialization


def canonical(value: Any) -> bytes:
    """The bytes that are signed and hashed: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def config_digest(config: dict[str, Any], server_public_key: str) -> str:
    """sha256 of the canonical (config, X25519 key) a device seals under: what
    devices and the shuffler compare, so neither a different config nor a
    per-device key goes unnoticed."""
    return hashlib.sha256(canonical({"config": config, "server_public_key": server_public_key})).hexdigest()


@dataclass(frozen=True)
class SigningKey:
    """The server's identity key."""

    private: Ed25519PrivateKey

    @property
    def public_raw(self) -> bytes:
        return _raw(self.private.public_key())

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_raw)

    def signed_config(self, round_id: str, config: dict[str, Any], server_public_key: str) -> dict[str, Any]:
        """The body of ``GET /rounds/{id}/config``: config, X25519 key, identity, signature."""
        body = {"round_id": round_id, "config": config, "server_public_key": server_public_key,
                "signing_key": base64.b64encode(self.public_raw).decode()}
        body["signature"] = base64.b64encode(self.private.sign(_DOMAIN + canonical(body))).decode()
        return body


@dataclass(frozen=True)
class VerifiedConfig:
    config: dict[str, Any]
    server_public_key: bytes
    digest: str


def verify_config(body: dict[str, Any], round_id: str, pinned: str) -> VerifiedConfig:
    """Accept ``body`` only if it is ``round_id``'s config signed by the pinned identity."""
    try:
        signed = {k: body[k] for k in ("round_id", "config", "server_public_key", "signing_key")}
        public_raw = base64.b64decode(body["signing_key"], validate=True)
        signature = base64.b64decode(body["signature"], validate=True)
        x25519 = base64.b64decode(body["server_public_key"], validate=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise TrustError(f"round {round_id}: the config is not signed ({exc!r} missing or malformed)") from exc
    if fingerprint(public_raw) != pinned:
        raise TrustError(
            f"round {round_id}: the config is signed by {fingerprint(public_raw)}, not the pinned server key {pinned}"
        )
    try:
        Ed25519PublicKey.from_public_bytes(public_raw).verify(signature, _DOMAIN + canonical(signed))
    except (InvalidSignature, ValueError) as exc:
        raise TrustError(f"round {round_id}: the config's signature does not verify") from exc
    if body["round_id"] != round_id:
        raise TrustError(f"asked for round {round_id}, got the signed config of round {body['round_id']}")
    if len(x25519) != 32:
        raise TrustError(f"round {round_id}: the signed X25519 key has {len(x25519)} bytes, not 32")
    return VerifiedConfig(dict(body["config"]), x25519, config_digest(body["config"], body["server_public_key"]))


def pinned_key(explicit: str | None = None) -> str | None:
    """The pin to use: an explicit one, else ``SHOAL_SERVER_KEY`` (a fingerprint, or a
    path to a file holding one), else none."""
    value = explicit or os.environ.get("SHOAL_SERVER_KEY") or None
    if value and not value.startswith("sha256:") and Path(value).is_file():
        value = Path(value).read_text().strip()
    if value is not None and not (value.startswith("sha256:") and len(value) == 7 + 64):
        raise TrustError(f"a server key pin is 'sha256:' and 64 hex digits, got {value!r}")
    return value


def identity_path(x25519_key_path: Path | str) -> Path:
    """Where a server keeps its identity key: beside its X25519 key."""
    return Path(str(x25519_key_path) + ".ed25519")


def load_or_create_signing_key(path: Path | str) -> SigningKey:
    """The server's Ed25519 identity, persisted (PKCS8 PEM, mode 0600)."""
    # the server's key file: not on a device's import path (issue 45, Build 5)
    from cryptography.hazmat.primitives import serialization

    path = Path(path)
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise TrustError(f"{path} does not hold an Ed25519 private key")
        return SigningKey(key)
    key = Ed25519PrivateKey.generate()
    write_secret(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    return SigningKey(key)
