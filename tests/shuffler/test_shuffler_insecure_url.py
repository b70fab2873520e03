"""The shuffler forwards batches with its credential only over TLS, or to a
server on this machine (issue 39, Build 5): a plain ``http://`` server URL to
another host is refused at start, naming it, unless told ``--insecure``.
And it starts only with a pinned server key, unless told ``--pin-first-use``
or, for a server on this machine only, ``--insecure-no-pin`` (issue 45)."""

from __future__ import annotations

import pytest

from shoal.common.cli import main
from shoal.common.errors import ConfigError
from shoal.shuffler.app import ShufflerSettings

TOKENS = {"token": "sh-" + "y" * 20, "enrol_token": "en-" + "z" * 20, "server_key": "sha256:" + "ab" * 32}


def test_the_shuffler_refuses_a_plain_http_server_on_another_host():
    with pytest.raises(ConfigError, match=r"the server URL 'http://server:8000' is plain http.*--insecure"):
        ShufflerSettings(server_url="http://server:8000", **TOKENS)


def test_the_shuffler_refuses_a_server_url_that_is_not_http():
    with pytest.raises(ConfigError, match=r"the server URL 'tcp://server:8000' is not an http:// or https://"):
        ShufflerSettings(server_url="tcp://server:8000", **TOKENS)


def test_the_shuffler_told_insecure_takes_plain_http_to_another_host():
    assert ShufflerSettings(server_url="http://server:8000", insecure=True, **TOKENS).server_url == "http://server:8000"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://localhost:8000", "https://server.example"])
def test_the_shuffler_takes_https_or_a_server_on_this_machine(url: str):
    assert ShufflerSettings(server_url=url, **TOKENS).server_url == url


def test_shoal_shuffler_refuses_a_plain_http_server_url_at_start(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SHOAL_SHUFFLER_TOKEN", TOKENS["token"])
    monkeypatch.setenv("SHOAL_ENROL_TOKEN", TOKENS["enrol_token"])
    monkeypatch.setenv("SHOAL_SERVER_KEY", TOKENS["server_key"])
    code = main(["shuffler", "--server-url", "http://server.example:8000", "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 2
    assert "shoal shuffler: the server URL 'http://server.example:8000' is plain http" in err and "--insecure" in err
    assert not (tmp_path / "s.db").exists()  # refused before the buffer was opened


KEY = "sha256:" + "ab" * 32


def test_the_shuffler_refuses_to_start_without_a_pinned_server_key():
    with pytest.raises(ValueError, match=r"no server key pinned: give --server-key"):
        ShufflerSettings(server_url="https://server.example", token=TOKENS["token"], enrol_token=TOKENS["enrol_token"])


def test_insecure_no_pin_is_only_for_a_server_on_this_machine():
    with pytest.raises(ValueError, match=r"--insecure-no-pin is only for a server on this machine"):
        ShufflerSettings(server_url="https://server.example", insecure_no_pin=True, token=TOKENS["token"],
                         enrol_token=TOKENS["enrol_token"])
    with pytest.raises(ValueError, match=r"--insecure-no-pin is only for a server on this machine"):
        ShufflerSettings(server_url="http://server:8000", insecure=True, insecure_no_pin=True, token=TOKENS["token"],
                         enrol_token=TOKENS["enrol_token"])
    ok = ShufflerSettings(server_url="http://127.0.0.1:8000", insecure_no_pin=True, token=TOKENS["token"],
                          enrol_token=TOKENS["enrol_token"])
    assert ok.server_key is None


def test_insecure_no_pin_contradicts_a_pin():
    with pytest.raises(ValueError, match=r"contradicts a pinned server key"):
        ShufflerSettings(server_url="http://127.0.0.1:8000", insecure_no_pin=True, server_key=KEY,
                         token=TOKENS["token"], enrol_token=TOKENS["enrol_token"])


def test_shoal_shuffler_refuses_to_start_without_a_pin_and_opens_no_buffer(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SHOAL_SHUFFLER_TOKEN", TOKENS["token"])
    monkeypatch.setenv("SHOAL_ENROL_TOKEN", TOKENS["enrol_token"])
    monkeypatch.delenv("SHOAL_SERVER_KEY", raising=False)
    code = main(["shuffler", "--server-url", "http://127.0.0.1:9", "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 2 and "shoal shuffler: no server key pinned" in err and "--insecure-no-pin" in err
    assert not (tmp_path / "s.db").exists()
