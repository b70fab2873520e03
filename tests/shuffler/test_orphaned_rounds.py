"""Issue 45: a server answering 404 for a round makes the shuffler orphan it,
not forget it. Its devices got 202 and were charged, so its messages stay
buffered (and counted in /healthz) until the round's age limit, are not
forwarded meanwhile, and are forwarded again if the server knows the round
again. The forwarder runs here against a scripted server (httpx.MockTransport)."""

from __future__ import annotations

import httpx
import pytest

from shoal.shuffler.app import Forwarder, RoundRule, ShufflerSettings
from shoal.shuffler.buffer import Added, Buffer

SETTINGS = dict(server_url="http://127.0.0.1:9", token="sh-" + "y" * 20, enrol_token="en-" + "z" * 20,
                server_key="sha256:" + "ab" * 32, max_round_age_seconds=3600.0, min_batch=1)


class Server:
    """A scripted server: GET /rounds/{id} and POST /rounds/{id}/shuffled answer ``status``."""

    def __init__(self) -> None:
        self.status = 404
        self.posted: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.posted.append(len(request.read()))
            return httpx.Response(self.status, json={"refused": []} if self.status == 202 else {"detail": "no such round"})
        return httpx.Response(self.status, json={})


@pytest.fixture
def forwarder(tmp_path):
    buffer = Buffer(str(tmp_path / "sh.db"))
    fwd = Forwarder(ShufflerSettings(db_path=str(tmp_path / "sh.db"), **SETTINGS), buffer)  # type: ignore[arg-type]
    server = Server()
    fwd.http = httpx.Client(transport=httpx.MockTransport(server))
    fwd._rules["r1"] = RoundRule(min_messages=1, auto_release=True, parts=1, digest="d" * 64)
    assert buffer.add_many([("r1", f"device-token-{i:04d}", [f"sealed-{i}".encode()], 1) for i in range(5)]) == [Added.BUFFERED] * 5
    return fwd, buffer, server


def test_a_round_the_server_answers_404_for_is_kept_and_counted_not_forgotten(forwarder):
    fwd, buffer, _ = forwarder
    assert fwd.expire() == []
    assert buffer.orphaned() == {"r1": 5}
    assert buffer.count("r1") == 5
    assert buffer.rounds_ready(1) == []  # not forwarded while the server does not know it
    assert "r1" not in fwd._rules  # new device messages re-read the config (and get the server's 404)


def test_orphaned_and_expired_messages_are_in_the_metrics(forwarder):
    from prometheus_client import generate_latest

    from shoal.shuffler.metrics import registry_for

    fwd, buffer, _ = forwarder
    fwd.expire()
    text = generate_latest(registry_for(fwd, buffer)).decode()
    assert 'shoal_shuffler_orphaned_messages{round="r1"} 5.0' in text
    fwd.expire(now=buffer.rounds()["r1"] + 3601.0)
    text = generate_latest(registry_for(fwd, buffer)).decode()
    assert "shoal_shuffler_expired_messages_total 5.0" in text and "orphaned_messages{" not in text


def test_an_orphaned_round_is_dropped_at_its_age_limit_and_counted_as_expired(forwarder):
    fwd, buffer, _ = forwarder
    fwd.expire()
    first = buffer.rounds()["r1"]
    assert fwd.expire(now=first + 3599.0) == [] and buffer.count("r1") == 5
    assert fwd.expire(now=first + 3601.0) == ["r1"]
    assert buffer.count("r1") == 0 and buffer.orphaned() == {} and buffer.rounds() == {}
    assert fwd.expired == 5


def test_an_orphaned_round_the_server_knows_again_is_forwarded(forwarder):
    fwd, buffer, server = forwarder
    fwd.expire()
    server.status = 200
    fwd.expire()
    assert buffer.orphaned() == {} and buffer.rounds_ready(1) == ["r1"]
    fwd._rules["r1"] = RoundRule(min_messages=1, auto_release=True, parts=1, digest="d" * 64)
    server.status = 202
    assert fwd.release("r1") == 5 and fwd.forwarded == 5 and buffer.count("r1") == 0


def test_a_404_to_a_forwarded_batch_keeps_the_batch_formed_and_orphans_the_round(forwarder):
    fwd, buffer, server = forwarder
    server.status = 404
    assert fwd.release("r1") == 0
    assert buffer.has_formed("r1") and buffer.orphaned() == {"r1": 5}
    assert fwd.dropped == {}  # not dropped: kept until the age limit
    assert buffer.rounds_ready(1) == []
    server.status = 200
    fwd.expire()
    fwd._rules["r1"] = RoundRule(min_messages=1, auto_release=True, parts=1, digest="d" * 64)
    server.status = 202
    assert fwd.release("r1") == 5  # the same batch, re-sent unchanged
    assert not buffer.has_formed("r1")


def test_a_409_still_drops_the_batch_for_good(forwarder):
    # Only 404 (unknown round) orphans; a closed round (409) can never take the batch.
    fwd, buffer, server = forwarder
    server.status = 409
    assert fwd.release("r1") == 0
    assert fwd.dropped == {"409": 5} and buffer.orphaned() == {} and not buffer.has_formed("r1")


def test_a_pin_taken_at_first_use_is_never_replaced_by_a_later_identity(tmp_path):
    first, later = "sha256:" + "ab" * 32, "sha256:" + "cd" * 32
    assert Buffer(str(tmp_path / "sh.db")).pin(first) == first
    assert Buffer(str(tmp_path / "sh.db")).pin(later) == first  # a restart against a server with another key
