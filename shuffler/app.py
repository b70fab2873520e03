"""The shuffler: accept sealed messages, batch, threshold, shuffle, forward.

Devices POST one sealed message per round with their device token; the
shuffler buffers them durably and, once at least ``min_batch`` are
buffered for a round, forwards a uniformly random permutation (``secrets``)
of all of them to the server's ``/rounds/{id}/shuffled`` with its own
credential, retrying until the server acknowledges; only then are they
dropped from the buffer (a crash in between re-forwards, and the server
counts each message id once). Nothing but the sealed bytes is forwarded.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

import httpx
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shoal.common.group_commit import GroupCommit
from shoal.shuffler.buffer import Buffer


@dataclass(frozen=True)
class ShufflerSettings:
    server_url: str
    token: str
    db_path: str = "shoal-shuffler.db"
    min_batch: int = 100
    poll_seconds: float = 0.2
    max_sealed_bytes: int = 1 << 20


FORWARD_CHUNK = 5000  # messages per POST to the server (its default limit is 10,000)


class SealedIn(BaseModel):
    """One device's submission: a sealed message, or (secure-sum rounds) the
    ``parts`` of its shares, each sealed separately and buffered as its own message."""

    model_config = ConfigDict(extra="forbid")
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


@dataclass(frozen=True)
class RoundRule:
    """What the shuffler reads from a round's public config: the smallest
    release, whether the forwarder may release on its own, and how many
    messages one device may submit."""

    min_messages: int
    auto_release: bool
    parts: int


class Forwarder:
    def __init__(self, settings: ShufflerSettings, buffer: Buffer) -> None:
        self.s = settings
        self.buffer = buffer
        self.http = httpx.Client(timeout=60)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.forwarded = 0
        self._rules: dict[str, RoundRule] = {}
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for rid in self.buffer.rounds_ready(self.s.min_batch):
                try:
                    if self.rule(rid).auto_release:
                        self.release(rid)
                except (httpx.HTTPError, RuntimeError) as exc:
                    logging.getLogger("shoal.shuffler").warning("round %s not released yet: %s", rid, exc)
                    time.sleep(self.s.poll_seconds)  # retried on the next pass
            self._stop.wait(self.s.poll_seconds)

    def rule(self, round_id: str) -> RoundRule:
        """Read once from the round's public config. A shuffle round's central
        guarantee assumes batches of its ``min_batch``; a secure-sum round's
        (refine, shuffle-model sketch) shares must all be mixed together, so it
        is released only by an explicit flush, as one permutation of every
        share, and only if it holds the shares of at least ``min_devices`` devices."""
        if round_id not in self._rules:
            r = self.http.get(f"{self.s.server_url}/rounds/{round_id}/config")
            if r.status_code != 200:
                raise RuntimeError(f"cannot read round {round_id}'s config: {r.status_code}")
            cfg = r.json()["config"]
            if cfg.get("secure_sum"):
                ss = cfg["secure_sum"]
                rule = RoundRule(int(ss["min_devices"]) * int(ss["shares"]), False, int(ss["shares"]))
            else:
                rule = RoundRule(int(cfg.get("min_batch", 0)), True, 1)
            self._rules[round_id] = rule
        return self._rules[round_id]

    def threshold(self, round_id: str) -> int:
        """The smallest batch released for a round: our --min-batch or the round's own, whichever is larger."""
        return max(self.s.min_batch, self.rule(round_id).min_messages)

    def release(self, round_id: str) -> int:
        """Forward every buffered message of a round, shuffled, if there are >= the round's threshold."""
        with self._lock:
            items = self.buffer.take(round_id)
            if len(items) < self.threshold(round_id):
                return 0
            secrets.SystemRandom().shuffle(items)
            # One permutation of everything, posted in chunks (the server bounds a
            # batch's size). A failed chunk leaves the buffer intact; the retry
            # resends all, and the server counts each message id once.
            for lo in range(0, len(items), FORWARD_CHUNK):
                body = {"sealed": [base64.b64encode(s).decode() for _, s in items[lo:lo + FORWARD_CHUNK]]}
                r = self.http.post(f"{self.s.server_url}/rounds/{round_id}/shuffled", json=body,
                                   headers={"Authorization": f"Bearer {self.s.token}"})
                if r.status_code != 202:
                    raise RuntimeError(f"server refused the batch: {r.status_code} {r.text}")
            self.buffer.forget(round_id, [d for d, _ in items])
            self.forwarded += len(items)
            return len(items)


def create_app(settings: ShufflerSettings) -> FastAPI:
    buffer = Buffer(settings.db_path)
    forwarder = Forwarder(settings, buffer)
    adder: GroupCommit[tuple[str, str, list[bytes]], bool] = GroupCommit(buffer.add_many, name="buffer-commit")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        forwarder.start()
        yield
        forwarder.stop()

    app = FastAPI(title="shoal shuffler", version="0.1.0", lifespan=lifespan)
    app.state.forwarder = forwarder

    @app.get("/healthz")
    def healthz() -> dict[str, object]:
        return {"status": "ok", "min_batch": settings.min_batch, "forwarded": forwarder.forwarded}

    @app.post("/rounds/{round_id}/messages", status_code=202)
    async def post_message(round_id: str, body: SealedIn,
                           x_device_token: Annotated[str | None, Header()] = None) -> dict[str, int]:
        if not x_device_token or len(x_device_token) < 16:
            raise HTTPException(status_code=401, detail="X-Device-Token header (>= 16 chars) required")
        try:
            raws = [base64.b64decode(item, validate=True) for item in body.items]
        except ValueError as exc:
            raise HTTPException(status_code=422, detail="sealed messages must be base64") from exc
        if any(len(raw) > settings.max_sealed_bytes for raw in raws):
            raise HTTPException(status_code=413, detail=f"sealed message over {settings.max_sealed_bytes} bytes")
        if len(raws) > 1:
            try:
                allowed = await asyncio.to_thread(forwarder.rule, round_id)
            except (httpx.HTTPError, RuntimeError) as exc:
                raise HTTPException(status_code=502, detail=f"cannot read the round's config: {exc}") from exc
            if len(raws) != allowed.parts:
                raise HTTPException(status_code=422, detail=f"round {round_id} takes {allowed.parts} parts per device, got {len(raws)}")
        if not await asyncio.wrap_future(adder.submit((round_id, x_device_token, raws))):
            raise HTTPException(status_code=409, detail="this device already sent a message for this round")
        return {"accepted": len(raws)}

    @app.post("/rounds/{round_id}/flush")
    def flush(round_id: str, authorization: Annotated[str | None, Header()] = None) -> dict[str, int]:
        if authorization != f"Bearer {settings.token}":
            raise HTTPException(status_code=403, detail="flush needs the shuffler token")
        n = buffer.count(round_id)
        try:
            need = forwarder.threshold(round_id)
        except (httpx.HTTPError, RuntimeError) as exc:
            raise HTTPException(status_code=502, detail=f"cannot read the round's config: {exc}") from exc
        if n < need:
            raise HTTPException(status_code=409, detail=f"only {n} messages buffered, below min_batch {need}")
        return {"forwarded": forwarder.release(round_id)}

    return app
