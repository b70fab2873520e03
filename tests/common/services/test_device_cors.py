"""SHOAL_DEVICE_ORIGINS: which web pages' browser devices may call a service
(``common/services/device_cors.py``)."""

from __future__ import annotations

import pytest

from shoal.common.errors import ConfigError
from shoal.common.services.device_cors import (
    SERVER_DEVICE_PATHS,
    SHUFFLER_DEVICE_PATHS,
    parse_origins,
)


def test_origins_are_parsed_from_a_comma_separated_list() -> None:
    assert parse_origins("https://app.example, http://localhost:5173/") == ("https://app.example", "http://localhost:5173")
    assert parse_origins("https://[::1]:8443") == ("https://[::1]:8443",)
    assert parse_origins("*") == ("*",)


def test_no_origins_by_default() -> None:
    assert parse_origins("") == ()
    assert parse_origins(" , ") == ()


def test_an_origin_with_a_path_is_refused() -> None:
    with pytest.raises(ConfigError, match="SHOAL_DEVICE_ORIGINS: 'https://app.example/page' is not an origin"):
        parse_origins("https://app.example/page")


def test_an_origin_without_a_scheme_is_refused() -> None:
    with pytest.raises(ConfigError, match="'app.example' is not an origin"):
        parse_origins("app.example")


def test_an_origin_of_another_scheme_is_refused() -> None:
    with pytest.raises(ConfigError, match="'ftp://app.example' is not an origin"):
        parse_origins("ftp://app.example")


def test_any_page_cannot_be_combined_with_listed_origins() -> None:
    with pytest.raises(ConfigError, match="'\\*' \\(any page\\) cannot be combined"):
        parse_origins("*,https://app.example")


@pytest.mark.parametrize("path", ["/protocol", "/server-key", "/rounds/open", "/rounds/r1", "/rounds/r1/config",
                                  "/rounds/r1/reports", "/rounds/r1/reports/binary"])
def test_the_server_paths_a_device_calls_are_opened(path: str) -> None:
    assert SERVER_DEVICE_PATHS.fullmatch(path)


@pytest.mark.parametrize("path", ["/rounds", "/rounds/r1/cluster", "/rounds/r1/result", "/rounds/r1/close", "/ui/rounds",
                                  "/metrics", "/rounds/r1/reports/batch", "/rounds/r1/shuffled", "/device"])
def test_operator_and_shuffler_paths_of_the_server_are_not(path: str) -> None:
    assert not SERVER_DEVICE_PATHS.fullmatch(path)


def test_the_shuffler_opens_only_a_rounds_messages() -> None:
    assert SHUFFLER_DEVICE_PATHS.fullmatch("/rounds/r1/messages")
    assert not SHUFFLER_DEVICE_PATHS.fullmatch("/enrol")
    assert not SHUFFLER_DEVICE_PATHS.fullmatch("/healthz")
