"""A device sends tokens and reports only over TLS, or to this machine (issue 39,
Build 5): plain ``http://`` to any other host is refused, naming the URL,
unless the caller says ``insecure``. Nothing here opens a connection: the
refusal comes before the first request."""

from __future__ import annotations

import pytest

from shoal.client.device import Device
from shoal.common.cli import main
from shoal.common.errors import ConfigError
from shoal.common.wire.transport import check_url, is_loopback_host


def test_a_device_refuses_a_plain_http_server_on_another_host(tmp_path):
    with pytest.raises(ConfigError, match=r"the server URL 'http://server\.example:8000' is plain http.*insecure=True"):
        Device("http://server.example:8000", tmp_path / "l.json")


def test_a_device_refuses_a_plain_http_shuffler_on_another_host(tmp_path):
    with pytest.raises(ConfigError, match=r"the shuffler URL 'http://10\.0\.0\.7:8001' is plain http"):
        Device("http://127.0.0.1:8000", tmp_path / "l.json", shuffler_url="http://10.0.0.7:8001")


def test_a_device_refuses_a_url_that_is_not_http(tmp_path):
    with pytest.raises(ConfigError, match=r"the server URL 'ftp://server\.example' is not an http:// or https://"):
        Device("ftp://server.example", tmp_path / "l.json")


def test_a_device_refuses_a_url_without_a_host(tmp_path):
    with pytest.raises(ConfigError, match=r"the server URL 'server\.example:8000' is not an http:// or https://"):
        Device("server.example:8000", tmp_path / "l.json")


def test_a_device_told_insecure_takes_plain_http_to_another_host(tmp_path):
    dev = Device("http://server:8000/", tmp_path / "l.json", shuffler_url="http://shuffler:8001", insecure=True)
    assert (dev.server_url, dev.shuffler_url) == ("http://server:8000", "http://shuffler:8001")


def test_a_device_takes_https_to_any_host(tmp_path):
    dev = Device("https://server.example", tmp_path / "l.json", shuffler_url="https://shuffler.example/")
    assert (dev.server_url, dev.shuffler_url) == ("https://server.example", "https://shuffler.example")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://127.4.5.6", "http://localhost:8000",
                                 "http://LOCALHOST", "http://[::1]:8000"])
def test_plain_http_to_this_machine_stays_allowed(url: str):
    assert check_url(url, "the server URL") == url


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.255.0.9", True), ("::1", True),
                                            ("localhost", True), ("10.0.0.1", False), ("0.0.0.0", False),
                                            ("localhost.example", False), ("server", False)])
def test_only_loopback_hosts_count_as_this_machine(host: str, loopback: bool):
    assert is_loopback_host(host) is loopback


def test_shoal_client_report_refuses_a_plain_http_server_naming_it_and_the_flag(tmp_path, capsys):
    code = main(["client", "report", "--server", "http://server.example:8000", "--round", "r1", "--point", "0.1,0.2",
                 "--ledger", str(tmp_path / "l.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert "shoal client report: the server URL 'http://server.example:8000' is plain http" in err
    assert "--insecure" in err and "https://" in err
    assert not (tmp_path / "l.json").exists()  # nothing read, nothing charged


def test_shoal_client_report_refuses_a_plain_http_shuffler_naming_it(tmp_path, capsys):
    code = main(["client", "report", "--server", "http://127.0.0.1:9", "--shuffler-url", "http://shuffler.example",
                 "--round", "r1", "--point", "0.1,0.2", "--ledger", str(tmp_path / "l.json")])
    assert code == 2
    assert "the shuffler URL 'http://shuffler.example' is plain http" in capsys.readouterr().err
