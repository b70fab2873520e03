"""How a decode reads a round into its kind's accumulator (issue 19, Builds 1-2).

In this process (the default): the round's rows a chunk at a time from one
snapshot of the store (``Store.iter_rows``), so a decode holds the
accumulator's tables and one chunk, never the round.

On a Dask cluster (``dask=`` a scheduler address, ``SHOAL_DASK_SCHEDULER``,
``shoal server --dask``): the 16-byte message-id space is cut into ranges
(a round's ids are uniformly random, so the ranges hold about equal shares
of its rows); each worker task opens the store read-only, reads one range
in chunks into an accumulator of the round's kind, and the accumulators are
summed by a tree reduction (a ``dask.bag`` reduction with ``split_every``),
so no process ever holds more than ``split_every`` accumulators and one
chunk. The merged accumulator comes back here and is decoded as usual.
Every accumulator is linear (``kinds/base.py``), so the merged tables are
the one-process tables: integer counts exactly, float sums to rounding.

A round being decoded is ``decoding``, and the store refuses reports for a
round that is not open inside the insert transaction (``Store._add_row_groups``),
so the ranges, read in separate snapshots, see one fixed set of reports.

Why Dask and not Ray or Spark: the work is numpy arrays summed by a tree of
merges, which is what ``dask.bag``'s reduction does, in the same Python
processes and with the same pickled numpy tables, without a JVM (Spark) or
an object store and actor runtime to operate (Ray); ``dask.distributed``'s
``LocalCluster`` runs the same code in tests, and a scheduler plus workers
are two pip-installed commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from shoal.common.errors import ConfigError, ShoalError
from shoal.common.kinds.base import DECODE_CHUNK
from shoal.server.rounds.kinds import server_kind
from shoal.server.rounds.kinds.base import Accumulator, ServerKind
from shoal.server.storage.factory import open_store
from shoal.server.storage.store import IdRange, Store

# One id range per worker thread: a range is read chunk by chunk, so its size
# bounds a task's time, not its memory, and a worker then holds one
# accumulator of its own and, while it merges, one more (700 MB each at
# d = 100). Finer ranges would balance load better but pile up finished
# accumulators on a worker until the reduction takes them (measured: 3
# ranges of 10^7 / 3 rows on one worker peaked at 2356 MB against 953 MB).
SPLIT_EVERY = 2  # accumulators merged by one task of the reduction tree: at d = 100 each is 700 MB
CONNECT_SECONDS = 10.0
POLL_SECONDS = 0.5  # how often a decode on Dask looks at its cluster while it waits
NO_WORKERS_SECONDS = 3.0  # a cluster with no worker this long has lost the decode's tasks
SCHEDULER_SCHEMES = ("tcp://", "tls://")


class DaskUnavailable(ShoalError):
    """The Dask scheduler named for a decode cannot be reached (503: retry, or
    decode in the server's own process)."""


def check_scheduler(address: str) -> str:
    """A scheduler address as given to ``--dask`` / ``SHOAL_DASK_SCHEDULER``."""
    host, _, port = address[6:].rpartition(":")
    if (not address.startswith(SCHEDULER_SCHEMES) or any(c.isspace() for c in address) or not host
            or len(host) > 253 or not port.isdigit() or not 1 <= int(port) <= 65535):
        raise ConfigError(f"a Dask scheduler address is tcp://HOST:PORT or tls://HOST:PORT (a host of at most 253 "
                          f"characters, a port 1-65535), got {address[:80]!r}")
    return address


def id_ranges(parts: int) -> list[IdRange]:
    """``parts`` contiguous ranges covering every 16-byte message id, cut on
    the ids' first two bytes (so at most 65,536 ranges)."""
    if not 1 <= parts <= 1 << 16:
        raise ConfigError(f"a decode is split into 1..65536 id ranges, not {parts}")
    cuts: list[bytes | None] = [((i << 16) // parts).to_bytes(2, "big") for i in range(1, parts)]
    bounds = [None, *cuts, None]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def read_into(store: Store, kind: ServerKind, cfg: Any, round_id: str, acc: Accumulator,
              ids: IdRange = (None, None)) -> Accumulator:
    """Add the round's rows with ids in ``ids`` to ``acc``, one chunk at a time."""
    chunks: Iterable[Any] = (store.iter_reports(round_id, DECODE_CHUNK, ids) if kind.storage == "reports"
                             else store.iter_payloads(round_id, *kind.row_width(cfg), ids=ids))
    for rows in chunks:
        acc.add(rows)
    return acc


def accumulate(store: Store, kind: ServerKind, cfg: Any, round_id: str) -> Accumulator:
    """The round's accumulator, read in this process."""
    return read_into(store, kind, cfg, round_id, kind.accumulator(cfg))


# -- on a Dask cluster --
_readers: dict[str, Store] = {}
_readers_lock = threading.Lock()


def _reader(db_url: str) -> Store:
    """One read-only store per worker process and URL (a worker runs many tasks)."""
    with _readers_lock:
        if db_url not in _readers:
            _readers[db_url] = open_store(db_url, read_only=True)
        return _readers[db_url]


def _partition(db_url: str, kind_name: str, cfg: Any, round_id: str, ranges: Iterable[IdRange]) -> Accumulator:
    """A worker task: the accumulator of the round's rows in ``ranges``."""
    kind = server_kind(kind_name)
    acc = kind.accumulator(cfg)
    for ids in ranges:
        read_into(_reader(db_url), kind, cfg, round_id, acc, ids)
    return acc


def _merge(accs: Iterable[Accumulator]) -> Accumulator:
    """A reduction task: the sum of several accumulators (into the first)."""
    it = iter(accs)
    total = next(it)
    for acc in it:
        total.merge(acc)
    return total


def worker_url(db_url: str) -> str:
    """The store's URL as a worker process opens it: a relative SQLite path is
    made absolute (a worker's working directory is its own). SQLite workers
    must run on the server's machine; PostgreSQL workers anywhere that
    reaches the database."""
    if db_url.startswith(("postgresql://", "postgres://")):
        return db_url
    path = db_url[len("sqlite:///"):] if db_url.startswith("sqlite:///") else db_url
    if path == ":memory:" or not path:
        raise ConfigError("an in-memory SQLite store cannot be decoded on Dask: its workers cannot open it")
    return "sqlite:///" + os.path.abspath(path)


def deadline_seconds(reports: int, setting: float = 0.0) -> float:
    """How long a decode on Dask may take before it is given up (issue 44):
    ``setting`` (SHOAL_DASK_DEADLINE_SECONDS) when positive, else from the
    round's size: 60 s plus 10 us a report, about seven times the slowest
    rate measured (10^8 reports on one worker: 146.6 s, 1.5 us a report)."""
    if setting < 0:
        raise ConfigError(f"a Dask decode's deadline must be >= 0 seconds (0: from the round's size), got {setting}")
    return setting if setting > 0 else 60.0 + 1e-5 * max(reports, 0)


def connect(scheduler: str, db_url: str) -> Any:
    """A client of the scheduler, checked before a decode takes its round's
    lease: a bad address, a store its workers cannot open, a missing extra
    (ConfigError) or a scheduler that does not answer or has no workers
    (DaskUnavailable) refuse the decode with the round's state unchanged."""
    check_scheduler(scheduler)
    worker_url(db_url)
    try:
        import distributed
    except ModuleNotFoundError as exc:
        raise ConfigError(f"decoding on Dask needs the 'scale' extra ({exc.name} is not installed): "
                          "pip install 'shoal[scale]'") from None
    try:
        # direct_to_workers: the merged accumulator comes straight from the worker
        # that holds it; through the scheduler it cost the scheduler 700 MB of
        # RSS at d = 100 and the transfer twice.
        client = distributed.Client(scheduler, timeout=CONNECT_SECONDS, set_as_default=False,
                                    direct_to_workers=True)
    except (OSError, TimeoutError) as exc:
        raise DaskUnavailable(f"the Dask scheduler {scheduler} cannot be reached: {exc}") from None
    except ValueError as exc:  # an address distributed cannot parse (a host name too long to encode, ...)
        raise ConfigError(f"the Dask scheduler address {scheduler[:80]!r} cannot be used: {exc}") from None
    except Exception as exc:  # noqa: BLE001 -- whatever else distributed raises while connecting: not reached
        raise DaskUnavailable(f"the Dask scheduler {scheduler[:80]} cannot be reached: "
                              f"{type(exc).__name__}: {exc}") from None
    if not _threads(client):  # the tasks would wait for a worker for ever
        client.close()
        raise DaskUnavailable(f"the Dask scheduler {scheduler} has no workers")
    return client


def _threads(client: Any) -> int:
    """Worker threads the scheduler knows now (0 if it does not answer within a few seconds)."""
    try:
        return int(sum(client.nthreads(callback_timeout=CONNECT_SECONDS).values()))
    except Exception:  # noqa: BLE001 -- a scheduler that cannot answer has no worker for us
        return 0


def accumulate_on_dask(scheduler: str, db_url: str, kind_name: str, cfg: Any, round_id: str,
                       partitions: int | None = None, split_every: int = SPLIT_EVERY,
                       deadline: float | None = None, client: Any = None) -> Accumulator:
    """The round's accumulator, summed on the Dask cluster at ``scheduler``
    (``partitions`` id ranges; default one per worker thread), within
    ``deadline`` seconds (None: ``deadline_seconds`` of no reports, 60 s).

    A cluster that loses every worker for ``NO_WORKERS_SECONDS`` or its
    scheduler, or a decode past its deadline, raises DaskUnavailable: the
    tasks are cancelled and nothing waits on them (before issue 44 a decode
    whose workers were all killed waited for ever, holding its round's
    lease). ``client``: one from ``connect`` (closed here either way)."""
    if split_every < 2:
        raise ConfigError(f"split_every must be >= 2, got {split_every}")
    client = client if client is not None else connect(scheduler, db_url)
    limit = deadline_seconds(0) if deadline is None else deadline
    url = worker_url(db_url)
    import dask.bag

    with client:
        parts = partitions or min(1 << 16, max(_threads(client), 1))
        bag = dask.bag.from_sequence(id_ranges(parts), npartitions=parts)
        total = bag.reduction(functools.partial(_partition, url, kind_name, cfg, round_id), _merge,
                              split_every=split_every)
        future = client.compute(total)
        try:
            acc: Accumulator = _wait(client, future, scheduler, limit)
        except BaseException:
            with contextlib.suppress(Exception):
                client.cancel([future])
            raise
        return acc


def _wait(client: Any, future: Any, scheduler: str, limit: float) -> Any:
    """The future's value, polled: DaskUnavailable past ``limit`` seconds, when
    no worker has been connected for ``NO_WORKERS_SECONDS``, or when the
    scheduler is gone (the client cancels the future)."""
    import distributed

    start = time.monotonic()
    workerless_since: float | None = None
    while True:
        left = limit - (time.monotonic() - start)
        if left <= 0:
            raise DaskUnavailable(f"the decode on the Dask scheduler {scheduler} did not finish within its "
                                  f"deadline of {limit:.0f} s (SHOAL_DASK_DEADLINE_SECONDS); its tasks were "
                                  "cancelled")
        try:
            return future.result(timeout=min(POLL_SECONDS, left))
        except distributed.TimeoutError:
            pass
        except (distributed.client.FutureCancelledError, asyncio.CancelledError, distributed.KilledWorker,
                OSError) as exc:
            raise DaskUnavailable(f"the decode on the Dask scheduler {scheduler} was lost: "
                                  f"{type(exc).__name__}: {exc}") from None
        now = time.monotonic()
        if _threads(client):
            workerless_since = None
        elif workerless_since is None:
            workerless_since = now
        elif now - workerless_since >= NO_WORKERS_SECONDS:
            raise DaskUnavailable(f"the Dask scheduler {scheduler} lost every worker during the decode "
                                  f"(none for {NO_WORKERS_SECONDS:.0f} s); its tasks were cancelled")
