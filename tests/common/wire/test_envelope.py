"""Sealed messages: only the server's key opens them, and only for their round."""

import os

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shoal.common.wire.envelope import (
    EnvelopeError,
    load_or_create_key,
    open_sealed,
    public_key_bytes,
    seal,
)


def test_server_opens_what_a_device_sealed():
    key = X25519PrivateKey.generate()
    sealed = seal(b'{"hist": 1}', public_key_bytes(key.public_key()), "r1")
    assert open_sealed(sealed, key, "r1") == b'{"hist": 1}'


def test_the_wrong_key_cannot_open_a_sealed_message():
    key, other = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    sealed = seal(b"secret", public_key_bytes(key.public_key()), "r1")
    with pytest.raises(EnvelopeError, match="does not open"):
        open_sealed(sealed, other, "r1")


def test_a_sealed_message_is_bound_to_its_round():
    key = X25519PrivateKey.generate()
    sealed = seal(b"secret", public_key_bytes(key.public_key()), "r1")
    with pytest.raises(EnvelopeError):
        open_sealed(sealed, key, "r2")


def test_tampering_is_detected():
    key = X25519PrivateKey.generate()
    sealed = bytearray(seal(b"secret", public_key_bytes(key.public_key()), "r1"))
    sealed[-1] ^= 1
    with pytest.raises(EnvelopeError):
        open_sealed(bytes(sealed), key, "r1")


def test_sealing_is_randomised():
    pub = public_key_bytes(X25519PrivateKey.generate().public_key())
    assert seal(b"x", pub, "r") != seal(b"x", pub, "r")


def test_rejects_truncated_messages():
    with pytest.raises(EnvelopeError, match="too short"):
        open_sealed(b"\x01abc", X25519PrivateKey.generate(), "r")


def test_rejects_a_malformed_public_key():
    with pytest.raises(EnvelopeError, match="32 raw bytes"):
        seal(b"x", b"short", "r")


def test_server_key_persists_across_restarts(tmp_path):
    path = tmp_path / "keys" / "server.pem"
    a = load_or_create_key(path)
    b = load_or_create_key(path)
    assert public_key_bytes(a.public_key()) == public_key_bytes(b.public_key())
    assert os.stat(path).st_mode & 0o777 == 0o600
