"""Rounds as a service: the glue between HTTP, the store and the decoder.

Pure orchestration: every piece of math lives in ``shoal.common`` and the
decoder; this module checks round state, validates reports against the
round's config, stores them durably, and runs decoding.
"""

from __future__ import annotations

import base64
import queue
import secrets
import threading
import time
from collections import Counter
from concurrent.futures import Future
from typing import Any

import numpy as np

from shoal.common.bounds import PublicBound
from shoal.common.config import RoundConfig, config_from_dict, config_to_dict, derive_config
from shoal.common.envelope import EnvelopeError, load_or_create_key, open_sealed, public_key_bytes
from shoal.common.errors import ShoalError
from shoal.common.messages import DeviceMessage, ReportBatch
from shoal.server.accumulate import LevelAccumulator
from shoal.server.api_models import CreateRoundIn
from shoal.server.decoder import TreeDecoder
from shoal.server.settings import Settings
from shoal.server.store import RoundRow, Store, open_store


class RoundStateError(ShoalError):
    """The round is not in a state that allows this (closed, decoding, not done)."""


class GroupCommitter:
    """Group commit: concurrent requests' reports share one transaction and one fsync.

    Each request blocks until the transaction holding its reports commits, so a
    2xx still means "durably stored"; under load many requests ride on one
    commit instead of paying an fsync each.
    """

    def __init__(self, store: Store, max_groups: int = 512) -> None:
        self.store = store
        self.max_groups = max_groups
        self.queue: queue.Queue[tuple[str, list[str], ReportBatch, Future[int]]] = queue.Queue()
        threading.Thread(target=self._loop, daemon=True).start()

    def submit(self, round_id: str, message_ids: list[str], batch: ReportBatch) -> int:
        fut: Future[int] = Future()
        self.queue.put((round_id, message_ids, batch, fut))
        return fut.result()

    def _loop(self) -> None:
        while True:
            items = [self.queue.get()]
            while len(items) < self.max_groups:
                try:
                    items.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            try:
                counts = self.store.add_report_groups([(r, ids, b) for r, ids, b, _ in items])
            except Exception as exc:  # noqa: BLE001 - every waiting request gets the failure
                for *_, fut in items:
                    fut.set_exception(exc)
                continue
            for (*_, fut), c in zip(items, counts, strict=True):
                fut.set_result(c)


class RoundService:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = open_store(settings.db_url)
        self.key = load_or_create_key(settings.key_path)
        self.public_key = base64.b64encode(public_key_bytes(self.key.public_key())).decode()
        self.metrics: Counter[str] = Counter()
        self.decode_seconds: list[float] = []
        self._configs: dict[str, RoundConfig] = {}
        self._decoding = threading.Lock()
        self.committer = GroupCommitter(self.store)

    # -- rounds --
    def create(self, inp: CreateRoundIn) -> RoundRow:
        b = inp.bound
        bound = PublicBound(radius=b.radius, low=tuple(b.low) if b.low else None, high=tuple(b.high) if b.high else None)
        round_id = secrets.token_hex(8)
        cfg = derive_config(
            inp.n_expected, inp.dim, inp.k, inp.epsilon, encoder=inp.encoder, bound=bound,
            round_id=round_id, **inp.tuning,
        )
        self.store.create_round(round_id, config_to_dict(cfg))
        return self.store.get_round(round_id)

    def config(self, round_id: str) -> RoundConfig:
        if round_id not in self._configs:
            self._configs[round_id] = config_from_dict(self.store.get_round(round_id).config)
        return self._configs[round_id]

    def get(self, round_id: str) -> RoundRow:
        return self.store.get_round(round_id)

    def delete(self, round_id: str) -> None:
        self.store.get_round(round_id)
        self.store.delete_round(round_id)
        self._configs.pop(round_id, None)

    # -- ingestion --
    def ingest(self, round_id: str, messages: list[DeviceMessage]) -> tuple[int, int]:
        """Validate and durably store; returns (new, duplicates)."""
        cfg = self.config(round_id)
        state = self.store.get_state(round_id)
        if state != "open":
            raise RoundStateError(f"round {round_id} is {state}, not open")
        try:
            batch = ReportBatch.from_messages(messages, cfg)
        except ShoalError:
            self.metrics["rejected_invalid"] += len(messages)
            raise
        new = self.committer.submit(round_id, [m.message_id for m in messages], batch)
        self.metrics["accepted"] += new
        self.metrics["duplicates"] += len(messages) - new
        return new, len(messages) - new

    def ingest_sealed(self, round_id: str, sealed: list[str]) -> tuple[int, int]:
        messages = []
        for item in sealed:
            try:
                raw = base64.b64decode(item, validate=True)
                messages.append(DeviceMessage.model_validate_json(open_sealed(raw, self.key, round_id)))
            except (ValueError, EnvelopeError) as exc:
                # ValueError covers bad base64 and pydantic's ValidationError alike.
                self.metrics["rejected_sealed"] += 1
                if isinstance(exc, EnvelopeError):
                    raise
                raise EnvelopeError(f"sealed message is malformed: {exc}") from exc
        return self.ingest(round_id, messages)

    # -- decoding --
    def cluster(self, round_id: str) -> dict[str, Any]:
        cfg = self.config(round_id)
        with self._decoding:
            row = self.store.get_round(round_id)
            if row.state == "decoding":
                raise RoundStateError(f"round {round_id} is already decoding")
            if row.reports == 0:
                raise RoundStateError(f"round {round_id} has no reports to decode")
            self.store.set_state(round_id, "decoding")
        t = time.perf_counter()
        try:
            batch = self.store.load_reports(round_id, cfg.dim)
            acc = LevelAccumulator(cfg)
            acc.add(batch)
            res = TreeDecoder(np.random.default_rng()).decode(acc)
            result = {
                "round_id": round_id,
                "centers": res.centers.tolist(),
                "sizes": [float(s) for s in res.sizes],
                "privacy": res.privacy,
                "diagnostics": _jsonable(res.diagnostics),
            }
        except Exception as exc:
            self.store.set_state(round_id, "failed", error=f"{type(exc).__name__}: {exc}")
            raise
        self.decode_seconds.append(time.perf_counter() - t)
        self.store.set_state(round_id, "done", result=result)
        return result

    def result(self, round_id: str) -> dict[str, Any]:
        row = self.store.get_round(round_id)
        if row.state != "done" or row.result is None:
            raise RoundStateError(f"round {round_id} has no result yet (state {row.state})")
        return row.result


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
