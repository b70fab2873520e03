"""Sealed messages: contents only the aggregation server can open.

A device seals each report to the server's static X25519 public key:
ephemeral X25519 key agreement, HKDF-SHA256 to a 256-bit key, and
ChaCha20-Poly1305 with the round id as associated data, so a sealed message
cannot be replayed into another round (DESIGN.md, "Privacy": the shuffler
sees identities, never contents). Only ``cryptography`` primitives are used;
its exceptions are mapped to :class:`EnvelopeError` here, at the boundary.

Wire layout: version byte (1) | ephemeral public key (32) | nonce (12) |
ciphertext with tag.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shoal.common.errors import ShoalError
from shoal.common.randomness.device_random import token_bytes

VERSION = 1
_INFO = b"shoal sealed report v1"
_HEADER = 1 + 32 + 12


class EnvelopeError(ShoalError):
    """A sealed message cannot be opened (wrong key, wrong round, tampered, malformed)."""


def _derive_key(shared: bytes, eph_pub: bytes, server_pub: bytes) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=eph_pub + server_pub, info=_INFO)
    return hkdf.derive(shared)


def public_key_bytes(key: X25519PublicKey) -> bytes:
    return key.public_bytes_raw()  # = public_bytes(Encoding.Raw, PublicFormat.Raw), without loading serialization


def seal(plaintext: bytes, server_public: bytes, round_id: str) -> bytes:
    """Encrypt ``plaintext`` so only the holder of the server's private key can read it."""
    try:
        server_key = X25519PublicKey.from_public_bytes(server_public)
    except ValueError as exc:
        raise EnvelopeError(f"server public key must be 32 raw bytes: {exc}") from exc
    eph = X25519PrivateKey.from_private_bytes(token_bytes(32))  # device-private (``device_random``)
    eph_pub = public_key_bytes(eph.public_key())
    key = _derive_key(eph.exchange(server_key), eph_pub, server_public)
    nonce = token_bytes(12)
    ct = ChaCha20Poly1305(key).encrypt(nonce, plaintext, round_id.encode())
    return bytes([VERSION]) + eph_pub + nonce + ct


def open_sealed(sealed: bytes, server_private: X25519PrivateKey, round_id: str) -> bytes:
    """Decrypt a sealed message for ``round_id``; raises EnvelopeError on any failure."""
    if len(sealed) < _HEADER + 16:
        raise EnvelopeError(f"sealed message too short: {len(sealed)} bytes")
    if sealed[0] != VERSION:
        raise EnvelopeError(f"unknown sealed-message version {sealed[0]}")
    eph_pub, nonce, ct = sealed[1:33], sealed[33:45], sealed[45:]
    server_pub = public_key_bytes(server_private.public_key())
    try:
        shared = server_private.exchange(X25519PublicKey.from_public_bytes(eph_pub))
        key = _derive_key(shared, eph_pub, server_pub)
        return ChaCha20Poly1305(key).decrypt(nonce, ct, round_id.encode())
    except (InvalidTag, ValueError) as exc:
        raise EnvelopeError("sealed message does not open with this key for this round") from exc


def load_or_create_key(path: Path | str) -> X25519PrivateKey:
    """The server's key pair, persisted (PKCS8 PEM, mode 0600) so it survives restarts."""
    # the server's key file: not on a device's import path (issue 45, Build 5)
    from cryptography.hazmat.primitives import serialization

    path = Path(path)
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, X25519PrivateKey):
            raise EnvelopeError(f"{path} does not hold an X25519 private key")
        return key
    key = X25519PrivateKey.generate()
    write_secret(path, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))
    return key


def write_secret(path: Path, data: bytes) -> None:
    """Write a private key file atomically (temp file, fsync, rename), mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
