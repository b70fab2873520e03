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

import functools
import os
import threading
from collections.abc import Iterable
from typing import Any

from shoal.common.errors import ConfigError, ShoalError
from shoal.common.kinds import DECODE_CHUNK
from shoal.server.rounds.kinds import server_kind
from shoal.server.rounds.kinds.base import Accumulator, ServerKind
from shoal.server.storage.store import IdRange, Store, open_store

# One id range per worker thread: a range is read chunk by chunk, so its size
# bounds a task's time, not its memory, and a worker then holds one
# accumulator of its own and, while it merges, one more (700 MB each at
# d = 100). Finer ranges would balance load better but pile up finished
# accumulators on a worker until the reduction takes them (measured: 3
# ranges of 10^7 / 3 rows on one worker peaked at 2356 MB against 953 MB).
SPLIT_EVERY = 2  # accumulators merged by one task of the reduction tree: at d = 100 each is 700 MB
CONNECT_SECONDS = 10.0
SCHEDULER_SCHEMES = ("tcp://", "tls://")


class DaskUnavailable(ShoalError):
    """The Dask scheduler named for a decode cannot be reached (503: retry, or
    decode in the server's own process)."""


def check_scheduler(address: str) -> str:
    """A scheduler address as given to ``--dask`` / ``SHOAL_DASK_SCHEDULER``."""
    if not address.startswith(SCHEDULER_SCHEMES) or len(address) <= 6 or any(c.isspace() for c in address):
        raise ConfigError(f"a Dask scheduler address is tcp://HOST:PORT or tls://HOST:PORT, got {address!r}")
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


def accumulate_on_dask(scheduler: str, db_url: str, kind_name: str, cfg: Any, round_id: str,
                       partitions: int | None = None, split_every: int = SPLIT_EVERY) -> Accumulator:
    """The round's accumulator, summed on the Dask cluster at ``scheduler``
    (``partitions`` id ranges; default one per worker thread)."""
    check_scheduler(scheduler)
    url = worker_url(db_url)
    try:
        import dask.bag
        import distributed
    except ModuleNotFoundError as exc:
        raise ConfigError(f"decoding on Dask needs the 'scale' extra ({exc.name} is not installed): "
                          "pip install 'shoal[scale]'") from None
    if split_every < 2:
        raise ConfigError(f"split_every must be >= 2, got {split_every}")
    try:
        # direct_to_workers: the merged accumulator comes straight from the worker
        # that holds it; through the scheduler it cost the scheduler 700 MB of
        # RSS at d = 100 and the transfer twice.
        client = distributed.Client(scheduler, timeout=CONNECT_SECONDS, set_as_default=False,
                                    direct_to_workers=True)
    except (OSError, TimeoutError) as exc:
        raise DaskUnavailable(f"the Dask scheduler {scheduler} cannot be reached: {exc}") from None
    with client:
        threads = sum(client.nthreads().values())
        if threads == 0:  # the tasks would wait for a worker for ever, holding the round's lease
            raise DaskUnavailable(f"the Dask scheduler {scheduler} has no workers")
        parts = partitions or min(1 << 16, threads)
        bag = dask.bag.from_sequence(id_ranges(parts), npartitions=parts)
        total = bag.reduction(functools.partial(_partition, url, kind_name, cfg, round_id), _merge,
                              split_every=split_every)
        acc: Accumulator = client.compute(total).result()
        return acc
