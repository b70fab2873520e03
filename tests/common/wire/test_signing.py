"""Signed round configs: a pinned identity's signature is required, and the
config digest changes with the config or the X25519 key it travels with."""

import os

import pytest

from shoal.common.wire.signing import (
    TrustError,
    config_digest,
    identity_path,
    load_or_create_signing_key,
    pinned_key,
    verify_config,
)

X25519 = "A" * 43 + "="  # 32 bytes of base64


@pytest.fixture
def key(tmp_path):
    return load_or_create_signing_key(tmp_path / "id.pem")


def test_a_signed_config_verifies_under_its_pin(key):
    body = key.signed_config("r1", {"k": 2, "min_batch": 100}, X25519)
    v = verify_config(body, "r1", key.fingerprint)
    assert v.config == {"k": 2, "min_batch": 100} and len(v.server_public_key) == 32
    assert v.digest == config_digest({"k": 2, "min_batch": 100}, X25519)


def test_the_identity_key_persists_with_mode_0600(tmp_path):
    a = load_or_create_signing_key(tmp_path / "id.pem")
    b = load_or_create_signing_key(tmp_path / "id.pem")
    assert a.fingerprint == b.fingerprint
    assert os.stat(tmp_path / "id.pem").st_mode & 0o777 == 0o600
    assert identity_path("/x/key.pem").name == "key.pem.ed25519"


def test_a_config_under_another_pin_is_refused(key, tmp_path):
    other = load_or_create_signing_key(tmp_path / "other.pem")
    with pytest.raises(TrustError, match="not the pinned server key"):
        verify_config(key.signed_config("r1", {"k": 2}, X25519), "r1", other.fingerprint)


def test_an_edited_config_is_refused(key):
    body = key.signed_config("r1", {"k": 2, "min_batch": 100}, X25519)
    body["config"]["min_batch"] = 2
    with pytest.raises(TrustError, match="does not verify"):
        verify_config(body, "r1", key.fingerprint)


def test_a_swapped_x25519_key_is_refused(key):
    body = key.signed_config("r1", {"k": 2}, X25519) | {"server_public_key": "B" * 43 + "="}
    with pytest.raises(TrustError, match="does not verify"):
        verify_config(body, "r1", key.fingerprint)


def test_another_rounds_config_is_refused(key):
    with pytest.raises(TrustError, match="asked for round r1"):
        verify_config(key.signed_config("r2", {"k": 2}, X25519), "r1", key.fingerprint)


def test_an_unsigned_config_is_refused(key):
    with pytest.raises(TrustError, match="not signed"):
        verify_config({"round_id": "r1", "config": {}, "server_public_key": X25519}, "r1", key.fingerprint)


def test_the_digest_covers_the_config_and_the_key():
    base = config_digest({"k": 2}, X25519)
    assert config_digest({"k": 3}, X25519) != base
    assert config_digest({"k": 2}, "B" * 43 + "=") != base


def test_a_malformed_pin_is_refused():
    with pytest.raises(TrustError, match="sha256"):
        pinned_key("md5:1234")


def test_a_pin_can_be_read_from_a_file(key, tmp_path):
    (tmp_path / "pin").write_text(key.fingerprint + "\n")
    assert pinned_key(str(tmp_path / "pin")) == key.fingerprint
