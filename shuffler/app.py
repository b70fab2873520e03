"""The shuffler: accept sealed messages, batch, threshold, shuffle, forward.

Devices POST one sealed message per round with their device token and the
digest of the round config they verified; the shuffler buffers them durably
and, once at least max(its own ``min_batch``, the round's) are pending for a
round, forms one batch (a fixed set in a ``secrets`` permutation,
``buffer.form_batch``) and forwards it to the server's
``/rounds/{id}/shuffled`` with its own credential. A failed or unanswered
forward re-sends exactly that batch; later arrivals form the next batch only
when there are enough of them (issue 12: an error after the server committed
used to merge newcomers into a group below min_batch). Nothing but the
sealed bytes is forwarded.

Trust (``common/wire/signing.py``): with a pinned server key (``server_key``,
``--server-key`` / ``SHOAL_SERVER_KEY``) the shuffler accepts only round
configs signed by that server, and refuses device messages whose config
digest differs from the config it verified (equivocation). A pin is
required (issue 45): without one the shuffler refuses to start, unless told
``pin_first_use`` (the server's identity read once at first start over the
server URL and kept in the buffer: it covers a server that changes identity
later, not one hostile from the start) or ``insecure_no_pin`` (no
verification at all; only for a server on this machine, for tests).

A round the server answers 404 for is *orphaned*, not forgotten (issue 45):
its devices got 202 and were charged, so its messages stay buffered and
counted in /healthz, are not forwarded while the server does not know the
round, and are dropped only at ``max_round_age_seconds``; a round that
comes back (a restored store, a misrouted proxy) is forwarded again.

Over 300 lines because the forwarder's retry and drop rules and the
endpoints that feed it must be read together to check that a message is
acknowledged only once it is durable and is never forwarded twice.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Annotated

import httpx
from fastapi import FastAPI, Header, HTTPException, Path, Response
from fastapi.responses import PlainTextResponse
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shoal.common.errors import ConfigError
from shoal.common.kinds import config_kinds, kind_name
from shoal.common.services.device_cors import (
    SHUFFLER_DEVICE_PATHS,
    allow_device_origins,
    parse_origins,
)
from shoal.common.services.environment import ServiceEnvironment
from shoal.common.services.group_commit import GroupCommit
from shoal.common.services.http_edge import guard
from shoal.common.wire.signing import TrustError, config_digest, verify_config
from shoal.common.wire.transport import check_url, is_loopback_host
from shoal.shuffler.buffer import Added, Buffer
from shoal.shuffler.metrics import registry_for

log = logging.getLogger("shoal.shuffler")


class ShufflerEnvironment(ServiceEnvironment):
    """The shuffler's SHOAL_* variables (pydantic-settings): its credential at
    the server, the operator's enrolment credential, the slow-client timeouts."""

    shuffler_token: str = ""
    enrol_token: str = ""


@dataclass(frozen=True)
class ShufflerSettings:
    server_url: str
    token: str
    db_path: str = "shoal-shuffler.db"
    min_batch: int = 100
    poll_seconds: float = 0.2
    max_sealed_bytes: int = 1 << 20
    max_body_bytes: int = 8 << 20  # a device's submission: one sealed message or its share parts
    server_key: str | None = None
    enrol_token: str = ""
    enrol_per_minute: int = 100_000
    round_check_seconds: float = 60.0  # how often rounds with buffered messages are checked at the server
    max_round_age_seconds: float = 7 * 86400.0  # a round's messages are dropped this long after its first
    header_seconds: float = 10.0  # see server/edge/settings.py (SHOAL_HEADER_SECONDS, SHOAL_BODY_SECONDS)
    body_seconds: float = 30.0
    insecure: bool = False  # allow plain http:// to a server not on this machine (common/wire/transport.py)
    pin_first_use: bool = False  # no server_key: read the server's identity once, keep it (module docstring)
    insecure_no_pin: bool = False  # no server_key and no verification: a loopback server only (tests)
    device_origins: tuple[str, ...] = ()  # SHOAL_DEVICE_ORIGINS: pages whose browser devices may submit (device_cors)

    def __post_init__(self) -> None:
        # Batches and the shuffler's credential must not cross a network in clear (issue 39).
        check_url(self.server_url, "the server URL", self.insecure,
                  flag="--insecure (ShufflerSettings(insecure=True))")
        # Configs are verified against a pinned identity, or the operator said otherwise (issue 45).
        if self.insecure_no_pin and (self.server_key or self.pin_first_use):
            raise ValueError("--insecure-no-pin contradicts a pinned server key (--server-key, --pin-first-use)")
        if self.insecure_no_pin and not is_loopback_host(httpx.URL(self.server_url).host):
            raise ValueError(f"--insecure-no-pin is only for a server on this machine, not {self.server_url}: pin the "
                             "server key (--server-key sha256:... or SHOAL_SERVER_KEY)")
        if not (self.server_key or self.pin_first_use or self.insecure_no_pin):
            raise ValueError("no server key pinned: give --server-key sha256:... (or SHOAL_SERVER_KEY; the server prints "
                             "its identity at start and serves it at /server-key), or --pin-first-use to trust the "
                             "identity the server shows at first start; --insecure-no-pin (no verification) is for a "
                             "server on this machine only")
        if len(self.token) < 16:
            raise ValueError(f"SHOAL_SHUFFLER_TOKEN is too short: {len(self.token)} characters, at least 16 are required")
        if len(self.enrol_token) < 16:
            raise ValueError("the shuffler needs an enrolment token of at least 16 characters (SHOAL_ENROL_TOKEN)")
        if self.enrol_token == self.token:
            raise ValueError("the enrolment token must differ from the shuffler's server credential")
        if self.device_origins != parse_origins(",".join(self.device_origins)):
            raise ValueError(f"device_origins must be parsed origins (parse_origins), got {self.device_origins!r}")


# Server answers that no retry can change: the round is unknown (404), not
# open (409), gone (410), or the batch does not fit it at all (422).
PERMANENT = frozenset({404, 409, 410, 422})
FORWARD_CHUNK = 5000  # messages per POST to the server (its default limit is 10,000)


class SealedIn(BaseModel):
    """One device's submission: a sealed message, or (secure-sum rounds) the
    ``parts`` of its shares, each sealed separately and buffered as its own message."""

    model_config = ConfigDict(extra="forbid")
    config_digest: str = Field(pattern=r"^[0-9a-f]{64}$",
                               description="sha256 of the canonical round config the device verified")
    sealed: str | None = Field(None, min_length=4, max_length=4 << 20, description="base64 sealed message")
    parts: list[Annotated[str, Field(min_length=4, max_length=4 << 20)]] | None = Field(
        None, min_length=1, max_length=256, description="base64 sealed shares (secure-sum rounds)")

    @model_validator(mode="after")
    def _one_form(self) -> SealedIn:
        if (self.sealed is None) == (self.parts is None):
            raise ValueError("give exactly one of sealed or parts")
        return self

    @property
    def items(self) -> list[str]:
        return [self.sealed] if self.sealed is not None else list(self.parts or [])


class EnrolIn(BaseModel):
    """An operator's request for new device tokens."""

    model_config = ConfigDict(extra="forbid")
    count: int = Field(ge=1, le=10_000, description="how many tokens to issue")


class RateLimit:
    """At most ``per_minute`` tokens issued per rolling minute (a fixed one-minute window)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute, self.start, self.used = per_minute, time.monotonic(), 0
        self.lock = threading.Lock()

    def take(self, n: int) -> float:
        """0 if ``n`` may be issued now (and counts them), else the seconds to wait."""
        with self.lock:
            now = time.monotonic()
            if now - self.start >= 60:
                self.start, self.used = now, 0
            if self.used + n > self.per_minute:
                return 60 - (now - self.start)
            self.used += n
            return 0.0


def _bearer_ok(header: str | None, secret: str) -> bool:
    return hmac.compare_digest((header or "").encode(), f"Bearer {secret}".encode())


@dataclass(frozen=True)
class RoundRule:
    """What the shuffler reads from a round's public config: the smallest
    release, whether the forwarder may release on its own, and how many
    messages one device may submit."""

    min_messages: int
    auto_release: bool
    parts: int
    digest: str
    submissions: int = 1


# A round id as the server issues them (and as is safe to put in a URL).
RoundId = Annotated[str, Path(pattern=r"^[0-9A-Za-z_-]{1,64}$", description="the server's round id")]


class UnknownRound(RuntimeError):
    """The server has no such round."""

class Forwarder:
    def __init__(self, settings: ShufflerSettings, buffer: Buffer) -> None:
        self.s = settings
        self.buffer = buffer
        self.http = httpx.Client(timeout=60)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.forwarded = 0
        self.refused: Counter[str] = Counter()  # items the server refused, by reason
        self.dropped: Counter[str] = Counter()  # items of batches dropped, by the server's status
        self.expired = 0  # messages dropped at a round's age limit (orphaned or abandoned rounds)
        self._rules: dict[str, RoundRule] = {}
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        next_check = time.monotonic() + self.s.round_check_seconds
        while not self._stop.is_set():
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + self.s.round_check_seconds
                try:
                    self.expire()
                except (httpx.HTTPError, RuntimeError) as exc:
                    log.warning("round expiry check failed: %s", exc)
            for rid in self.buffer.rounds_ready(self.s.min_batch):
                try:
                    if self.rule(rid).auto_release:
                        self.release(rid)
                except (httpx.HTTPError, RuntimeError) as exc:
                    log.warning("round %s not released yet: %s", rid, exc)
                    time.sleep(self.s.poll_seconds)  # retried on the next pass
            self._stop.wait(self.s.poll_seconds)

    def expire(self, now: float | None = None) -> list[str]:
        """Forget rounds older than ``max_round_age_seconds`` (abandoned: they
        would otherwise stay for ever; issue 13: junk rounds slowed a real
        round's release from 0.21 s to 6.5 s), and orphan, not forget, rounds
        the server answers 404 for: their devices got 202 and were charged,
        so the messages are kept (and counted) until that age limit, and
        forwarded again if the server knows the round again (issue 45)."""
        now = time.time() if now is None else now
        gone = []
        orphaned = self.buffer.orphaned()
        for rid, first in self.buffer.rounds().items():
            if now - first > self.s.max_round_age_seconds:
                with self._lock:
                    kept = self.buffer.orphaned().get(rid)
                    dropped = kept if kept is not None else self.buffer.count(rid)
                    self.buffer.forget_round(rid)
                    self._rules.pop(rid, None)
                    self.expired += dropped
                gone.append(rid)
                log.warning("round %s expired at the shuffler: its %d buffered message(s) were dropped", rid, dropped)
                continue
            status = self.http.get(f"{self.s.server_url}/rounds/{rid}").status_code
            if status == 404 and rid not in orphaned:
                self.orphan(rid)
            elif status == 200 and rid in orphaned:
                self.buffer.set_orphaned(rid, False)
                log.warning("round %s is known to the server again: its buffered messages will be forwarded", rid)
        return gone

    def orphan(self, round_id: str) -> None:
        """The server does not know the round: stop forwarding it, keep its messages."""
        with self._lock:
            self._orphan_held(round_id)

    def _orphan_held(self, round_id: str) -> None:
        """``orphan`` with ``_lock`` already held (``release``)."""
        self.buffer.set_orphaned(round_id, True)
        self._rules.pop(round_id, None)
        log.warning("round %s: the server answered 404; its buffered messages are kept (not forwarded) until the "
                    "round's age limit (%g h), counted as orphaned in /healthz", round_id,
                    self.s.max_round_age_seconds / 3600)

    def rule(self, round_id: str) -> RoundRule:
        """Read once from the round's public config. A shuffle round's central
        guarantee assumes batches of its ``min_batch``; a secure-sum round's
        (refine, shuffle-model sketch) shares must all be mixed together, so it
        is released only by an explicit flush, as one permutation of every
        share, and only if it holds the shares of at least ``min_devices`` devices."""
        if round_id not in self._rules:
            r = self.http.get(f"{self.s.server_url}/rounds/{round_id}/config")
            if r.status_code == 404:
                raise UnknownRound(f"the server has no round {round_id}")
            if r.status_code != 200:
                raise RuntimeError(f"cannot read round {round_id}'s config: {r.status_code}")
            body = r.json()
            cfg = verify_config(body, round_id, self.s.server_key).config if self.s.server_key else body["config"]
            digest = config_digest(cfg, body["server_public_key"])
            try:  # parsed and checked by its kind, as a device does
                kind = config_kinds()[kind_name(cfg)]
                mixing = kind.mixing(kind.parse(cfg))
            except ConfigError as exc:
                raise RuntimeError(f"the server's config for round {round_id} is not valid: {exc}") from exc
            self._rules[round_id] = RoundRule(mixing.min_messages, mixing.auto_release, mixing.parts_per_device, digest,
                                              mixing.submissions_per_device)
        return self._rules[round_id]

    def threshold(self, round_id: str) -> int:
        """The smallest batch released for a round: our --min-batch or the round's own, whichever is larger."""
        return max(self.s.min_batch, self.rule(round_id).min_messages)

    def release(self, round_id: str) -> int:
        """Forward the round's batch: an unfinished one unchanged, else a new one
        of every pending message if there are >= the round's threshold."""
        with self._lock:
            items = self.buffer.form_batch(round_id, self.threshold(round_id))
            if items is None:
                return 0
            # One permutation, posted in near-equal chunks (the server bounds a
            # batch's size). A failed chunk keeps the batch formed; the retry
            # resends the same messages in the same order, and the server counts
            # each message id once.
            chunks = -(-len(items) // FORWARD_CHUNK)
            for c in range(chunks):
                part = items[c * len(items) // chunks:(c + 1) * len(items) // chunks]
                body = {"sealed": [base64.b64encode(s).decode() for s in part]}
                r = self.http.post(f"{self.s.server_url}/rounds/{round_id}/shuffled", json=body,
                                   headers={"Authorization": f"Bearer {self.s.token}"})
                if r.status_code == 404:
                    # Unknown to the server: the formed batch is kept as it is (re-sent
                    # unchanged if the round comes back), never dropped before its age limit.
                    self._orphan_held(round_id)
                    return 0
                if r.status_code in PERMANENT:
                    # The round is gone, closed or decoding: no retry can deliver
                    # this batch. Dropped (and counted), never re-sent.
                    self.dropped[str(r.status_code)] += len(items)
                    self.buffer.finish_batch(round_id)
                    log.warning("round %s: batch of %d dropped, server answered %d: %s",
                                round_id, len(items), r.status_code, r.text[:200])
                    return 0
                if r.status_code != 202:
                    raise RuntimeError(f"server did not take the batch: {r.status_code} {r.text[:200]}")
                # Per-item outcomes (issue 13): refused items are poison (they
                # will never open or fit the round); counted by reason, not retried.
                for item in r.json().get("refused", []):
                    self.refused[str(item.get("reason", "unknown"))] += 1
            self.buffer.finish_batch(round_id)
            self.forwarded += len(items)
            log.info("round %s: released a shuffled batch of %d message(s)", round_id, len(items))
            return len(items)


def _server_identity(server_url: str) -> str:
    """The fingerprint the server shows now (``GET /server-key``), for ``pin_first_use``."""
    try:
        r = httpx.get(f"{server_url}/server-key", timeout=30)
        r.raise_for_status()
        fingerprint = r.json()["fingerprint"]
    except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
        raise ConfigError(f"--pin-first-use: cannot read the server's identity at {server_url}/server-key: {exc}") from exc
    if not (isinstance(fingerprint, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", fingerprint)):
        raise ConfigError(f"--pin-first-use: the server's identity is not a sha256 fingerprint: {str(fingerprint)[:80]!r}")
    return fingerprint


def create_app(settings: ShufflerSettings) -> FastAPI:
    config_kinds().load_all()  # every kind's config module loaded now, not on a device's first message (1.2 s here)
    buffer = Buffer(settings.db_path)
    pin_mode = "pinned" if settings.server_key else "first use" if settings.pin_first_use else "none (insecure, loopback)"
    if not settings.server_key and settings.pin_first_use:
        settings = replace(settings, server_key=buffer.pin(_server_identity(settings.server_url)))
        log.warning("server identity pinned at first use: %s (kept in %s; a later identity is refused)",
                    settings.server_key, settings.db_path)
    forwarder = Forwarder(settings, buffer)
    adder: GroupCommit[tuple[str, str, list[bytes], int], Added] = GroupCommit(buffer.add_many, name="buffer-commit")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        forwarder.start()
        yield
        forwarder.stop()

    app = FastAPIOffline(title="shoal shuffler", version="0.1.0", lifespan=lifespan)  # docs served locally
    guard(app, settings.max_body_bytes, body_seconds=settings.body_seconds)
    allow_device_origins(app, settings.device_origins, SHUFFLER_DEVICE_PATHS, headers=("content-type", "x-device-token"))
    app.state.forwarder = forwarder
    limit = RateLimit(settings.enrol_per_minute)

    @app.post("/enrol", status_code=201)
    def enrol(body: EnrolIn, response: Response, authorization: Annotated[str | None, Header()] = None) -> dict[str, list[str]]:
        """Issue device tokens (operator only, rate-limited): only enrolled devices
        may submit, so a batch's count is of enrolled contributors."""
        if not _bearer_ok(authorization, settings.enrol_token):
            raise HTTPException(status_code=403, detail="enrolment needs the shuffler's enrolment token")
        wait = limit.take(body.count)
        if wait:
            response.headers["Retry-After"] = str(int(wait) + 1)
            raise HTTPException(status_code=429, detail=f"enrolment limit of {settings.enrol_per_minute} tokens "
                                f"per minute reached; retry in {int(wait) + 1} s", headers={"Retry-After": str(int(wait) + 1)})
        return {"tokens": buffer.enrol(body.count)}

    registry = registry_for(forwarder, buffer)

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> Response:
        """Prometheus text format (``shuffler/metrics.py``)."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    def healthz() -> dict[str, object]:
        orphaned = buffer.orphaned()
        return {"status": "ok", "min_batch": settings.min_batch, "forwarded": forwarder.forwarded,
                "refused": dict(forwarder.refused), "dropped": dict(forwarder.dropped),
                "orphaned": {"rounds": len(orphaned), "messages": sum(orphaned.values()),
                             "note": "rounds the server answered 404 for: their messages are kept, not forwarded, "
                                     "until the round's age limit"},
                "expired": forwarder.expired, "server_key": pin_mode}

    @app.post("/rounds/{round_id}/messages", status_code=202)
    async def post_message(round_id: RoundId, body: SealedIn,
                           x_device_token: Annotated[str | None, Header()] = None) -> dict[str, int]:
        if not x_device_token or len(x_device_token) < 16:
            raise HTTPException(status_code=401, detail="X-Device-Token header (>= 16 chars) required")
        if not await asyncio.to_thread(buffer.is_enrolled, x_device_token):
            raise HTTPException(status_code=403, detail="device token not enrolled at this shuffler (tokens are "
                                "issued by the operator through POST /enrol)")
        try:
            raws = [base64.b64decode(item, validate=True) for item in body.items]
        except ValueError as exc:
            raise HTTPException(status_code=422, detail="sealed messages must be base64") from exc
        if any(len(raw) > settings.max_sealed_bytes for raw in raws):
            raise HTTPException(status_code=413, detail=f"sealed message over {settings.max_sealed_bytes} bytes")
        try:
            allowed = await asyncio.to_thread(forwarder.rule, round_id)
        except UnknownRound as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        except TrustError as exc:
            raise HTTPException(status_code=502, detail=f"the server's config does not verify: {exc}") from exc
        except (httpx.HTTPError, RuntimeError) as exc:
            raise HTTPException(status_code=502, detail=f"cannot read the round's config: {exc}") from exc
        if body.config_digest != allowed.digest:
            raise HTTPException(status_code=409, detail=(
                f"config equivocation: the device verified config {body.config_digest[:16]}..., the shuffler's "
                f"config for round {round_id} is {allowed.digest[:16]}...; message refused"))
        if len(raws) != allowed.parts:
            raise HTTPException(status_code=422, detail=f"round {round_id} takes {allowed.parts} parts per device, got {len(raws)}")
        added = await asyncio.wrap_future(adder.submit((round_id, x_device_token, raws, allowed.submissions)))
        if added is Added.REFUSED:
            raise HTTPException(status_code=409, detail="this device already submitted (as often as the round allows) "
                                "for this round, or part of this submission was already submitted")
        # a retry of exactly the sealed bytes already taken (its first answer was lost) is acknowledged, not
        # stored twice: the same answer as the server's for a retried report id
        return {"accepted": 0, "duplicates": len(raws)} if added is Added.HELD else {"accepted": len(raws), "duplicates": 0}

    def threshold_or_http(round_id: str) -> int:
        """The round's batch threshold, or the HTTP error that says why it is unknown."""
        try:
            return forwarder.threshold(round_id)
        except UnknownRound as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        except (httpx.HTTPError, RuntimeError) as exc:
            raise HTTPException(status_code=502, detail=f"cannot read the round's config: {exc}") from exc

    @app.post("/rounds/{round_id}/flush")
    def flush(round_id: RoundId, authorization: Annotated[str | None, Header()] = None) -> dict[str, int]:
        if not _bearer_ok(authorization, settings.token):
            raise HTTPException(status_code=403, detail="flush needs the shuffler token")
        n, need = buffer.count(round_id), threshold_or_http(round_id)
        if n < need and not buffer.has_formed(round_id):
            raise HTTPException(status_code=409, detail=f"only {n} messages buffered, below min_batch {need}")
        try:
            return {"forwarded": forwarder.release(round_id)}
        except (httpx.HTTPError, RuntimeError) as exc:
            raise HTTPException(status_code=502, detail=f"the batch is formed but the server did not take it "
                                f"yet (it will be re-sent unchanged): {exc}") from exc

    @app.get("/rounds/{round_id}")
    def pending(round_id: RoundId, authorization: Annotated[str | None, Header()] = None) -> dict[str, object]:
        """What the shuffler holds for a round (issue 16: devices seemed to vanish
        when a tail below min_batch stayed here). Shuffler token only: the
        operator's view of the mixing, not the devices'."""
        if not _bearer_ok(authorization, settings.token):
            raise HTTPException(status_code=403, detail="reading a round's buffer needs the shuffler token")
        n, need = buffer.count(round_id), threshold_or_http(round_id)
        formed = buffer.has_formed(round_id)
        return {"round_id": round_id, "pending": n, "threshold": need, "batch_formed": formed,
                "releasable": formed or n >= need,
                "note": "messages below the threshold stay here until more arrive: a smaller batch would break the "
                        "round's central guarantee"}

    @app.delete("/rounds/{round_id}", status_code=204)
    def forget(round_id: RoundId, authorization: Annotated[str | None, Header()] = None) -> None:
        """Drop everything about a round (its member-hash key first): nothing of it remains."""
        if not _bearer_ok(authorization, settings.token):
            raise HTTPException(status_code=403, detail="deleting a round needs the shuffler token")
        buffer.forget_round(round_id)

    return app
