"""Rounds as a service: round state, durable ingestion and decoding.

Pure orchestration. What differs between kinds of round (the config, the
wire model of a report, its stored rows, the accumulator, the decoder, the
privacy statement) is the kind's (``rounds/kinds/``), found by the config's
``kind``; this module never looks at config types. It checks round state,
stores reports durably (a 2xx means committed), and decodes under a lease.
It takes domain objects (``RoundRequest``, ``RoundsSettings``), never the
HTTP edge's models.

Over 300 lines because the three ingestion paths (single reports committed
on the event loop, batches through the group-commit thread, shuffled
batches item by item) and decoding all take the one round-state lock:
"a 2xx means committed before any decode starts" is checkable in one file.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.errors import BatchTooLarge, ConfigError, ReportError, ShoalError
from shoal.common.kinds import dump_config, kind_name, parse_config
from shoal.common.services.group_commit import GroupCommit, commit_and_settle
from shoal.common.wire.binary import batch_from_rows, decode_records
from shoal.common.wire.envelope import load_or_create_key, public_key_bytes
from shoal.common.wire.signing import identity_path, load_or_create_signing_key
from shoal.server.rounds import leases, reduction
from shoal.server.rounds.kinds import (
    SERVER_KINDS,
    ElbowRequest,
    RefineRequest,
    RoundRequest,
    ServerKind,
    for_encoder,
    server_kind,
)
from shoal.server.rounds.kinds.elbow import KIND as ELBOW
from shoal.server.rounds.kinds.local_refine import KIND as LOCAL_REFINE
from shoal.server.rounds.kinds.local_refine import LocalRefineServer
from shoal.server.rounds.kinds.refine import KIND as REFINE
from shoal.server.rounds.kinds.refine import RefineServer
from shoal.server.rounds.sealed import Refused, open_items, valid_part
from shoal.server.rounds.steps import Steps
from shoal.server.storage import report_rows
from shoal.server.storage.factory import open_store
from shoal.server.storage.id_sets import ID_BUDGET
from shoal.server.storage.store import NOT_OPEN, Packed, RoundRow, packed_reports

log = logging.getLogger("shoal.server.rounds")


class RoundStateError(ShoalError):
    """The round is not in a state that allows this (closed, decoding, not done)."""


@dataclass(frozen=True)
class RoundsSettings:
    """What the round service needs of the server's settings (``edge/settings.py`` makes one)."""

    db_url: str
    key_path: str
    decode_lease_seconds: float = 30.0
    decode_memory_bytes: int = 8 << 30
    report_retention_days: float = 0.0
    dask_scheduler: str = ""  # decodes sum their reports on this Dask scheduler ("": in this process)
    dask_deadline_seconds: float = 0.0  # a decode on Dask is given up after this (0: from the round's size)
    dask_fallback: bool = False  # a decode Dask lost runs in this process instead of answering 503
    id_set_budget: int = ID_BUDGET  # message ids a SQLite store keeps in memory (``storage/id_sets.py``)


class RoundService:
    """One per server process: round states are cached here, and every state
    change goes through this object (the store arbitrates between replicas)."""

    def __init__(self, settings: RoundsSettings) -> None:
        self.settings = settings
        self.store = open_store(settings.db_url, id_budget=settings.id_set_budget)
        self.key = load_or_create_key(settings.key_path)
        self.public_key = base64.b64encode(public_key_bytes(self.key.public_key())).decode()
        self.identity = load_or_create_signing_key(identity_path(settings.key_path))
        self.metrics: Counter[str] = Counter()
        self.decode_seconds: list[float] = []
        self._rounds: dict[str, tuple[ServerKind, Any]] = {}
        self.holder = leases.new_holder()
        self.steps = Steps(self.store, self.key)  # continual rounds' curators (``rounds/steps.py``)
        # Held while reports commit and while a round leaves "open": a report is
        # either committed before decoding starts (and decoded) or refused.
        self._state_lock = threading.Lock()
        self._states: dict[str, str] = {}
        self.committer: GroupCommit[Packed, int] = GroupCommit(self._commit, name="report-commit")
        # Single POSTs commit on the event loop's own thread: the first report
        # of a group schedules one commit (call_soon) for every report parsed
        # until it runs. No thread hand-off, so no wait for the GIL between the
        # statements of a commit (measured with the commit thread: its SQL took
        # 5.5 ms at the median and 45 ms at p99 under load, the fsync 1 ms).
        # Open loop at 1000/s, 50 connections: p99 5.0 ms against 7.4 ms with
        # the thread; saturation 3016/s against 2737/s. Batches keep the thread.
        self._loop_group: list[tuple[Packed, asyncio.Future[int]]] = []
        self.recover_stranded()
        if settings.report_retention_days > 0:
            threading.Thread(target=self._retention_loop, daemon=True, name="retention").start()

    # -- rounds --
    def create(self, request: RoundRequest) -> RoundRow:
        # encoder "auto" never becomes a partition round here, though simulate and the
        # bench run one where the tree locates nothing (kinds.refine.first_round): a
        # partition round has no local guarantee, so devices that did not consent to
        # that (allow_no_local_guarantee) would refuse it. The operator names it.
        kind = for_encoder(request.encoder)
        round_id = secrets.token_hex(8)
        return self._store_new(round_id, kind, kind.derive(request, round_id))

    def create_refine(self, parent_id: str, request: RefineRequest) -> RoundRow:
        """A refine round on a done round's centers (``rounds/kinds/refine.py``)."""
        kind, cfg = self.round(parent_id)
        if not kind.refinable:
            refinable = ", ".join(sorted(k.name for k in SERVER_KINDS.values() if k.refinable))
            raise RoundStateError(f"round {parent_id} is a {kind.name} round: refine rounds open on {refinable} rounds")
        result = self._done_result(parent_id, "refine")
        if request.split is None:
            request = replace(request, split=kind.refine_split)
        # No model named: a request with secure-sum parameters sums through the
        # shuffler (as before local refine rounds existed); else the parent's model.
        secure = bool(request.delta or request.min_devices)
        model = request.model or ("shuffle" if secure else getattr(cfg, "model", "shuffle"))
        child: RefineServer | LocalRefineServer = LOCAL_REFINE if model == "local" else REFINE
        if child is REFINE and (not request.delta or not request.min_devices):
            raise ConfigError("a shuffle refine round needs delta and min_devices (its secure sum's guarantee)")
        if child is LOCAL_REFINE and kind is REFINE:
            raise ConfigError(f"round {parent_id} is a refine round: a refine round on it sums through the shuffler "
                              "again (model 'shuffle', delta and min_devices); a local refine round opens on a first round")
        if child is LOCAL_REFINE and (request.delta or request.min_devices or request.max_devices):
            raise ConfigError(f"round {parent_id} is a local-model round: its refine round is local (fresh devices, "
                              "eps-LDP reports) and takes no delta, min_devices or max_devices; "
                              "ask for model 'shuffle' to sum through the shuffler")
        round_id = secrets.token_hex(8)
        return self._store_new(round_id, child, child.derive_child(parent_id, result, cfg.bound, request, round_id))

    def create_elbow(self, parent_id: str, request: ElbowRequest) -> RoundRow:
        """An elbow round on a done round's ordered centers (``rounds/kinds/elbow.py``)."""
        kind, cfg = self.round(parent_id)
        if kind is ELBOW:
            raise ConfigError(f"round {parent_id} is an elbow round: it already costs every k' of its parent "
                              f"{cfg.parent_id}'s centers")
        result = self._done_result(parent_id, "an elbow round")
        round_id = secrets.token_hex(8)
        return self._store_new(round_id, ELBOW, ELBOW.derive_child(parent_id, result, cfg.bound, request, round_id))

    def _done_result(self, parent_id: str, what: str) -> dict[str, Any]:
        """The result a round opened on ``parent_id`` starts from (RoundStateError unless done)."""
        parent = self.store.get_round(parent_id)
        if parent.state != "done" or parent.result is None:
            raise RoundStateError(f"round {parent_id} is {parent.state}: {what} needs its centers (state done)")
        return parent.result

    def _store_new(self, round_id: str, kind: ServerKind, cfg: Any) -> RoundRow:
        need, budget = cfg.decode_bytes(), self.settings.decode_memory_bytes
        if need > budget:
            raise ConfigError(f"decoding this round would need about {_gib(need)} of memory, over the server's "
                              f"decode budget of {_gib(budget)} (SHOAL_DECODE_MEMORY_BYTES): lower k, dim, "
                              "n_expected or the tuning, or raise the budget")
        self.store.create_round(round_id, dump_config(kind.name, cfg))
        log.info("round %s created: kind %s, k=%s, dim=%s, model %s, encoder %s", round_id, kind.name,
                 getattr(cfg, "k", "?"), getattr(cfg, "dim", "?"), getattr(cfg, "model", "shuffle"),
                 getattr(cfg, "encoder", kind.name))
        return self.store.get_round(round_id)

    def round(self, round_id: str) -> tuple[ServerKind, Any]:
        """The round's kind and published config, parsed once per process (UnknownRound if none)."""
        if round_id not in self._rounds:
            data = self.store.get_round(round_id).config
            self._rounds[round_id] = (server_kind(kind_name(data)), parse_config(data))
        return self._rounds[round_id]

    # RoundsView (rounds/kinds/base.py): what a decoder may ask about other rounds.
    def privacy_of(self, round_id: str) -> tuple[object, dict[str, Any]]:
        kind, cfg = self.round(round_id)
        return kind.privacy(cfg)

    def result_of(self, round_id: str) -> dict[str, Any] | None:
        return self.store.get_round(round_id).result

    def parent_of(self, round_id: str) -> str | None:
        parent: str | None = getattr(self.round(round_id)[1], "parent_id", None)
        return parent

    def opened_on(self) -> dict[str, list[tuple[str, str, Any]]]:
        out: dict[str, list[tuple[str, str, Any]]] = {}
        for row in self.store.list_rounds():
            if (parent := row.config.get("parent_id")) is not None:
                out.setdefault(parent, []).append((row.id, kind_name(row.config), parse_config(row.config)))
        return {parent: sorted(kids, key=lambda c: c[0]) for parent, kids in out.items()}

    def state(self, round_id: str) -> str:
        """The round's state (cached; UnknownRound if there is no such round)."""
        if round_id not in self._states:
            self._states[round_id] = self.store.get_state(round_id)
        return self._states[round_id]

    def _require_open(self, round_id: str) -> None:
        state = self.state(round_id)
        if state != "open":
            raise RoundStateError(f"round {round_id} is {state}, not open")

    def get(self, round_id: str) -> RoundRow:
        row = self.store.get_round(round_id)
        if row.state == "decoding" and self.recover_stranded(only=round_id):
            row = self.store.get_round(round_id)
        return row

    def close(self, round_id: str) -> None:
        with self._state_lock:
            self._require_open(round_id)
            self.store.set_state(round_id, "closed")
            self._states[round_id] = "closed"
        log.info("round %s closed", round_id)

    def delete(self, round_id: str) -> None:
        """Delete a round and its reports in one transaction; refused (409)
        while a live decode holds the round's lease."""
        with self._state_lock:
            if not self.store.delete_round(round_id, time.time()):
                raise RoundStateError(f"round {round_id} is decoding: it can be deleted once the decode ends")
            self._rounds.pop(round_id, None)
            self._states.pop(round_id, None)
        self.steps.forget(round_id)
        log.info("round %s deleted with its reports", round_id)

    def result(self, round_id: str) -> dict[str, Any]:
        row = self.store.get_round(round_id)
        if row.state != "done" or row.result is None:
            raise RoundStateError(f"round {round_id} has no result yet (state {row.state})")
        return row.result

    # -- ingestion --
    def _rows(self, round_id: str, messages: Sequence[BaseModel]) -> tuple[ServerKind, Any]:
        """Reports posted directly: checked against the round's kind and config."""
        kind, cfg = self.round(round_id)
        model = kind.direct_model(cfg)
        if isinstance(model, str):
            raise RoundStateError(model)
        self._require_open(round_id)  # early refusal; checked again at commit
        try:
            return kind, kind.rows(cfg, messages)
        except ShoalError:
            self.metrics["rejected_invalid"] += len(messages)
            raise

    def _count(self, new: int, total: int) -> tuple[int, int]:
        self.metrics["accepted"] += new
        self.metrics["duplicates"] += total - new
        return new, total - new

    def ingest(self, round_id: str, messages: Sequence[BaseModel]) -> tuple[int, int]:
        """Validate and durably store; returns (new, duplicates). Blocks until committed."""
        kind, rows = self._rows(round_id, messages)
        return self._count(self._store(kind, round_id, [_message_id(m) for m in messages], rows), len(messages))

    async def ingest_async(self, round_id: str, messages: Sequence[BaseModel]) -> tuple[int, int]:
        """As ``ingest``, awaiting the commit instead of holding a worker thread."""
        kind, rows = self._rows(round_id, messages)
        ids = [_message_id(m) for m in messages]
        if kind.storage != "reports":
            return self._count(await asyncio.to_thread(self._store, kind, round_id, ids, rows), len(messages))
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._loop_group.append((packed_reports(round_id, ids, rows), fut))
        if len(self._loop_group) == 1:
            asyncio.get_running_loop().call_soon(self._commit_loop_group)
        return self._count(await fut, len(messages))

    def _binary_group(self, round_id: str, body: bytes, max_reports: int) -> Packed:
        """A binary batch of tree reports (``common/wire/binary.py``) parsed with
        numpy and validated like JSON reports, as the store keeps it: ids as
        bytes, rows as the store's ``TREE_ROW`` (no hex or column round trip)."""
        kind, cfg = self.round(round_id)
        if kind.storage != "reports" or isinstance(kind.direct_model(cfg), str):
            raise RoundStateError(f"round {round_id} is a {kind.name} round: binary batches carry tree reports; "
                                  "post its reports as JSON")
        self._require_open(round_id)
        try:
            records = decode_records(body)
            if len(records) > max_reports:
                raise BatchTooLarge(f"binary batch of {len(records)} reports exceeds {max_reports}")
            batch_from_rows(records["row"], round_id).validate(cfg)
        except ShoalError:
            self.metrics["rejected_invalid"] += 1
            raise
        return round_id, list(records["message_id"].tolist()), report_rows.pack_tree_rows(records["row"])

    async def ingest_binary_async(self, round_id: str, body: bytes, max_reports: int) -> tuple[int, int]:
        """Store a binary batch (``_binary_group``) in one group commit, on the
        event loop (parsing a batch of 1000 takes ~0.1 ms), awaiting the commit
        instead of holding a worker thread; returns (new, duplicates)."""
        group = self._binary_group(round_id, body, max_reports)
        return self._count(await asyncio.wrap_future(self.committer.submit(group)), len(group[1]))

    def ingest_sealed(self, round_id: str, sealed: list[str]) -> tuple[int, int, list[Refused]]:
        """A shuffled batch, item by item (``rounds/sealed.py``): returns (new,
        duplicates, refused). Refusing a whole batch is left to round-level
        errors (unknown, closed round). Secure-sum rounds keep their
        all-or-nothing decode: a refused share makes the sum fail loudly."""
        kind, cfg = self.round(round_id)
        model = kind.sealed_model(cfg)
        if isinstance(model, str):
            raise RoundStateError(model)
        self._require_open(round_id)
        kept, refused = open_items(sealed, self.key, round_id, model)
        valid, rows = valid_part(kept, lambda msgs: kind.rows(cfg, msgs), refused)
        self.metrics["rejected_sealed"] += len(refused)
        if not valid:
            return 0, 0, sorted(refused)
        new = self._store(kind, round_id, [_message_id(m) for m in valid], rows)
        self._count(new, len(valid))
        return new, len(valid) - new, sorted(refused)

    def _store(self, kind: ServerKind, round_id: str, ids: list[str], rows: Any) -> int:
        """Commit while the round is still open; returns how many rows were new."""
        if kind.storage == "reports":
            return self.committer.submit(packed_reports(round_id, ids, rows)).result()
        return self._store_payloads(round_id, ids, rows, events=kind.storage == "events")

    def _store_payloads(self, round_id: str, message_ids: list[str], rows: NDArray[Any], events: bool = False) -> int:
        with self._state_lock:
            self._require_open(round_id)
            new = (self.store.add_events(round_id, message_ids, rows) if events
                   else self.store.add_payloads(round_id, message_ids, rows, only_open=True))
            if new == NOT_OPEN:
                raise self._not_open(round_id)
            return new

    def _commit(self, groups: list[Packed]) -> list[int | BaseException]:
        """GroupCommit's writer: one transaction for every open round's reports;
        groups for rounds that are no longer open get their RoundStateError."""
        with self._state_lock:
            refused: dict[int, BaseException] = {}
            for i, (round_id, _, _) in enumerate(groups):
                try:
                    self._require_open(round_id)
                except ShoalError as exc:
                    refused[i] = exc
            ok = [i for i in range(len(groups)) if i not in refused]
            stored = self.store.add_packed_groups([groups[i] for i in ok], only_open=True) if ok else []
            counts = dict(zip(ok, stored, strict=True))
            for i, c in counts.items():
                if c == NOT_OPEN:  # another replica closed, decoded or deleted it: the database says so
                    refused[i] = self._not_open(groups[i][0])
            return [refused[i] if i in refused else counts[i] for i in range(len(groups))]

    def _not_open(self, round_id: str) -> RoundStateError:
        """The error for a round the store found not open, its cached state dropped."""
        self._states.pop(round_id, None)
        try:
            state = self.store.get_state(round_id)
        except ShoalError:
            state = "deleted"
        return RoundStateError(f"round {round_id} is {state}, not open")

    def _commit_loop_group(self) -> None:
        """Event-loop group commit (comment in ``__init__``): every single report
        queued since the last one, in one transaction, on the loop's own thread."""
        group, self._loop_group = self._loop_group, []
        commit_and_settle(self._commit, [p for p, _ in group], [fut for _, fut in group])

    # -- continual rounds: steps (``rounds/steps.py``) --
    def _stream(self, round_id: str) -> tuple[ServerKind, Any]:
        kind, cfg = self.round(round_id)
        if kind.storage != "events":
            raise RoundStateError(f"round {round_id} is a {kind.name} round: only continual rounds have steps")
        return kind, cfg

    def has_steps(self, round_id: str) -> bool:
        """Is this a round that releases by steps (a continual round)?"""
        return self.round(round_id)[0].storage == "events"

    def close_step(self, round_id: str) -> dict[str, Any]:
        """Close the round's open step and return its release. Events committed
        before this belong to the step; later ones to the next."""
        kind, cfg = self._stream(round_id)
        horizon = cfg.params.horizon
        with self._state_lock:
            step = self.store.close_step(round_id, horizon)
        if step is None:
            state = self.store.get_state(round_id)
            if state != "open":
                raise RoundStateError(f"round {round_id} is {state}: its stream has ended, no step can be closed")
            raise RoundStateError(f"round {round_id} has released all {horizon} steps of its horizon "
                                  "(a longer stream needs a new round with its own budget)")
        log.info("round %s: step %d closed", round_id, step)
        return self.steps.releases(kind, cfg, round_id, since=step - 1)[0]

    def step_releases(self, round_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The releases of the round's closed steps after ``since``."""
        kind, cfg = self._stream(round_id)
        return self.steps.releases(kind, cfg, round_id, since)

    # -- decoding --
    def cluster(self, round_id: str, dask: str | None = None, again: bool = False,
                fallback: bool | None = None) -> dict[str, Any]:
        """The round's result: its first successful decode is its release, and
        every later call returns that stored result, drawing nothing (issue 44).

        ``again``: decode a done round anew, for kinds whose decode is
        post-processing (``ServerKind.decode_draws_noise`` False); the earlier
        results stay (``results``). A kind whose decode draws private noise is
        never decoded twice (RoundStateError, 409).

        The decode runs under a lease (``rounds/leases.py``), renewed while it
        runs; the result is written only if this process still holds it.
        ``dask``: a scheduler address to sum the round's reports on (None: the
        server's ``SHOAL_DASK_SCHEDULER``; "": in this process); the cluster is
        checked before the round's state changes, and a decode that loses its
        workers or scheduler, or passes its deadline, puts the round back to
        ``closed`` with the error and answers DaskUnavailable (503), unless
        ``fallback`` (None: ``SHOAL_DASK_FALLBACK``) decodes it in this process."""
        kind, cfg = self.round(round_id)
        if kind.storage == "events":
            raise RoundStateError(f"round {round_id} is a continual round: it releases at every step "
                                  f"(POST /rounds/{round_id}/steps closes one; GET /rounds/{round_id}/steps reads them)")
        done = self.store.get_state(round_id) == "done"
        if again and kind.decode_draws_noise:
            raise RoundStateError(f"round {round_id} is a {kind.name} round: its decode draws private noise on the "
                                  "data the server holds, so its answer is released once; a second decode would be "
                                  "a second release the privacy statement does not cover")
        if again and not done:
            raise RoundStateError(f"round {round_id} has no result to decode again: POST /rounds/{round_id}/cluster "
                                  "without 'again' decodes it the first time")
        if done and not again:
            return self.result(round_id)
        scheduler = self.settings.dask_scheduler if dask is None else dask
        client = reduction.connect(scheduler, self.settings.db_url) if scheduler else None
        try:
            with self._state_lock:
                reports = self.store.count_reports(round_id)
                if reports == 0:
                    raise RoundStateError(f"round {round_id} has no reports to decode")
                now = time.time()
                if not self.store.take_lease(round_id, self.holder, now + self.settings.decode_lease_seconds, now,
                                             again=again):
                    if not again and self.store.get_state(round_id) == "done":  # another call released it
                        return self.result(round_id)
                    raise RoundStateError(f"round {round_id} is already decoding")
                self._states[round_id] = "decoding"
        except BaseException:
            if client is not None:
                client.close()
            raise
        stop = leases.heartbeat(self.store, round_id, self.holder, self.settings.decode_lease_seconds)
        t = time.perf_counter()
        # A failed re-decode leaves the round done with its earlier result.
        back = "done" if again else "closed"
        try:
            acc = self._accumulate(kind, cfg, round_id, scheduler, client, reports, fallback)
            result = kind.decode(cfg, acc, self, round_id)
        except reduction.DaskUnavailable as exc:
            stop.set()
            log.warning("round %s: decode on Dask given up after %.2f s: %s", round_id, time.perf_counter() - t, exc)
            self._end_decode(round_id, back, error=f"{type(exc).__name__}: {exc}")
            raise
        except Exception as exc:
            stop.set()
            log.warning("round %s: decode failed after %.2f s: %s: %s", round_id, time.perf_counter() - t,
                        type(exc).__name__, exc)
            self._end_decode(round_id, back if again else "failed", error=f"{type(exc).__name__}: {exc}")
            raise
        stop.set()
        seconds = time.perf_counter() - t
        self.decode_seconds.append(seconds)
        self._end_decode(round_id, "done", result=result)
        answer = (result.get("quality") or {}).get("answer", "done")
        log.info("round %s decoded in %.2f s: %s", round_id, seconds, answer)
        return self.result(round_id)

    def _accumulate(self, kind: ServerKind, cfg: Any, round_id: str, scheduler: str, client: Any, reports: int,
                    fallback: bool | None) -> Any:
        """The round's accumulator: on the Dask cluster ``client`` is connected
        to (within the round's deadline), or in this process."""
        if client is None:
            return reduction.accumulate(self.store, kind, cfg, round_id)
        deadline = reduction.deadline_seconds(reports, self.settings.dask_deadline_seconds)
        self.store.settle()  # the workers read ``report_rows`` alone, read-only
        try:
            with self.store.external_readers():
                return reduction.accumulate_on_dask(scheduler, self.settings.db_url, kind.name, cfg, round_id,
                                                    deadline=deadline, client=client)
        except reduction.DaskUnavailable as exc:
            if not (self.settings.dask_fallback if fallback is None else fallback):
                raise
            log.warning("round %s: %s; decoding in this process (fallback allowed)", round_id, exc)
            self.metrics["dask_fallbacks"] += 1
            return reduction.accumulate(self.store, kind, cfg, round_id)

    def results(self, round_id: str) -> list[dict[str, Any]]:
        """Every result the round's decodes wrote, oldest first, each with its
        version and time (a round that draws noise at decode has one)."""
        self.store.get_round(round_id)  # UnknownRound first
        return [{"version": v, "written": t, "result": r} for v, t, r in self.store.results(round_id)]

    def _end_decode(self, round_id: str, state: str, **kw: Any) -> None:
        with self._state_lock:
            ok = self.store.end_lease(round_id, self.holder, state, **kw)
            self._states.pop(round_id, None)
        if not ok:
            raise RoundStateError(f"round {round_id}: this decode lost its lease (the round was deleted or its "
                                  "lease expired and another decode took it); its result was discarded")

    def recover_stranded(self, only: str | None = None) -> list[str]:
        """Rounds left ``decoding`` by a server that is gone go back to ``closed``.
        Called at start-up and when a decoding round is read."""
        back, seen = leases.free_stranded(self.store, self.holder, only)
        for rid in seen:
            self._states.pop(rid, None)
        return back

    # -- retention --
    def purge_expired(self, now: float | None = None) -> list[str]:
        """Delete the reports of done rounds created more than
        ``report_retention_days`` ago (results stay)."""
        now = time.time() if now is None else now
        return self.store.purge_reports(now - self.settings.report_retention_days * 86400)

    def _retention_loop(self) -> None:
        while True:
            try:
                self.purge_expired()
            except ShoalError:  # storage unavailable: the next pass tries again
                pass
            time.sleep(3600)


def _message_id(message: BaseModel) -> str:
    mid = getattr(message, "message_id", None)
    if not isinstance(mid, str):
        raise ReportError(f"a {type(message).__name__} carries no message id")
    return mid


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.3g} MiB"
