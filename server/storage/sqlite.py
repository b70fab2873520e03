"""The embedded store: SQLite in WAL mode, fsync on every commit, and a
checkpointer that keeps the WAL file bounded (issue 13)."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from shoal.server.storage.store import (
    WAL_KEEP_BYTES,
    WAL_TRUNCATE_BYTES,
    IdRange,
    Run,
    Store,
    StoreError,
    T,
    storage_errors,
)

CACHE_BYTES = 64 << 20  # the writing connection's page cache
INBOX_ROWS = 65_536  # inbox rows that start a merge pass into ``report_rows``
MERGE_SLICE_SECONDS = 0.005  # a merge slice's statements aim at this (its commit's fsync comes on top)
MERGE_PAUSE_SECONDS = 0.005  # between slices: commits waiting for the lock take it
MERGE_SLICE_ROWS = (64, 65_536)  # the range a slice's size adapts in


class SQLiteStore(Store):
    """The embedded default: one file, WAL journal, fsync on every commit.

    New rows go to the inbox (``Store.inbox``), merged into ``report_rows``
    every ``inbox_rows`` rows. The cap was measured (``shoal bench
    --services``' batch pairs): big enough that a merge writes each page of
    a large round once for many rows, small enough that the inbox's own
    pages stay few and cached.

    The merge is a background pass (``_merge_loop``, issue 44): slices of
    consecutive keys, each its own transaction of about
    ``MERGE_SLICE_SECONDS``, with a pause between them. Before, the whole
    merge ran inside the commit of the request that filled the inbox: at
    10^6 stored rows it held the write lock for 1.1-1.9 s, and every request
    of that moment waited (single-POST p99 over 1 s in every window that had
    a merge). A slice moves its rows and deletes them from the inbox in one
    transaction, so a SIGKILL at any moment leaves each row in exactly one
    of the two tables."""

    inbox = "report_inbox"
    inbox_rows = INBOX_ROWS
    concat_reports = ("SELECT CAST(group_concat(report, x'') AS BLOB), count(*) FROM "
                      "(SELECT report, message_id FROM report_rows WHERE {where} UNION ALL "
                      "SELECT report, message_id FROM report_inbox WHERE {where} ORDER BY message_id)")

    def __init__(self, path: str, read_only: bool = False, inbox_rows: int | None = None,
                 merge_in_background: bool = True) -> None:
        """``merge_in_background``: False merges a full inbox right after the
        commit that filled it, in the committing thread (tests that check where
        each row waits)."""
        super().__init__()
        self.path = path
        self._read_only = read_only
        if inbox_rows is not None:
            if inbox_rows < 1:
                raise StoreError(f"inbox_rows must be >= 1, got {inbox_rows}")
            self.inbox_rows = inbox_rows
        self._readers = 0  # snapshot reads in progress (``_row_chunks``): no TRUNCATE checkpoint meanwhile
        self._readers_lock = threading.Lock()
        if read_only:  # a Dask worker reading partitions of a store a server keeps (``factory.open_store``)
            if not os.path.exists(path):
                raise StoreError(f"no SQLite store at {path!r}")
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout=10000")
            return
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        # Pages freed by deleted reports go back to the file system (``reclaim``);
        # takes effect for databases created from now on.
        self._conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA busy_timeout=10000")
        # Reports are keyed by random message ids, so every insert lands on a
        # random leaf page: SQLite's default 2 MiB page cache made most of them
        # a read from the file (measured: 116k rows/s at 2 MiB, 157k at 64 MiB,
        # 4000-row groups into a fresh table, issue 19).
        self._conn.execute(f"PRAGMA cache_size={-(CACHE_BYTES >> 10)}")
        # Checkpoints (copying the WAL into the database file, with an fsync)
        # run on their own connection and thread, never inside a report's
        # commit: an automatic checkpoint made one commit in ~100 take 20-85 ms
        # under load, and every request waiting on that commit with it.
        # They wait for a quiet moment (no commit for ``idle_seconds``) and are
        # forced every ``max_interval`` seconds under continuous load.
        self._conn.execute("PRAGMA wal_autocheckpoint=0")
        # After a checkpoint lets the log restart, the file is cut back to this
        # size (otherwise it keeps its largest size for ever).
        self._conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
        self._merge_wanted = threading.Event()
        self._pass_lock = threading.Lock()  # one merge pass at a time (the merger's or settle's)
        self._slice_rows = 1024
        self.init_schema()
        self._last_commit = time.monotonic()
        self._dirty = False
        threading.Thread(target=self._checkpoint_loop, daemon=True, name="sqlite-checkpoint").start()
        self._background = merge_in_background
        if merge_in_background:
            threading.Thread(target=self._merge_loop, daemon=True, name="sqlite-merge").start()

    def _wake_merger(self) -> None:
        if self._background:
            self._merge_wanted.set()
        else:
            self._merge_pass()

    def _merge_loop(self) -> None:
        """Run a merge pass whenever the inbox reaches ``inbox_rows`` (woken by
        the commit that filled it; checked every second as well)."""
        while True:
            self._merge_wanted.wait(1.0)
            self._merge_wanted.clear()
            if self._in_inbox < self.inbox_rows:
                continue
            try:
                self._merge_pass()
            except StoreError:  # storage unavailable now: the next wake tries again
                time.sleep(1.0)

    def _timed_slice(self, run: Run, after: tuple[int, bytes] | None,
                     spent: list[float]) -> tuple[tuple[int, bytes] | None, int]:
        """``_merge_slice`` of the current slice size; its seconds appended to ``spent``."""
        lo, hi = MERGE_SLICE_ROWS
        t = time.perf_counter()
        out = self._merge_slice(run, after, min(max(self._slice_rows, lo), hi))
        spent.append(time.perf_counter() - t)
        return out

    def _merge_pass(self) -> int:
        """Every inbox row present when the pass starts (and those that arrive
        ahead of it) moved into ``report_rows`` by slices in key order; each
        slice's size adapts so it holds the write lock ``MERGE_SLICE_SECONDS``.
        Returns the rows moved."""
        lo, hi = MERGE_SLICE_ROWS
        total = 0
        with self._pass_lock:
            after: tuple[int, bytes] | None = None
            while True:
                spent: list[float] = []
                after, moved = self._in_transaction(functools.partial(self._timed_slice, after=after, spent=spent))
                self._moved(moved)
                total += moved
                # Geometric step toward the size that takes MERGE_SLICE_SECONDS.
                scale = (MERGE_SLICE_SECONDS / max(spent[0], 1e-4)) ** 0.5
                self._slice_rows = int(min(max(self._slice_rows * scale, lo), hi))
                if after is None:
                    return total
                time.sleep(MERGE_PAUSE_SECONDS)

    @contextlib.contextmanager
    def external_readers(self) -> Iterator[None]:
        """Other processes read snapshots meanwhile (a distributed decode's
        workers): no TRUNCATE checkpoint, which would wait for them holding the
        store's lock, and every commit of this process with it."""
        with self._readers_lock:
            self._readers += 1
        try:
            yield
        finally:
            with self._readers_lock:
                self._readers -= 1

    def _checkpoint_loop(self, idle_seconds: float = 0.5, max_interval: float = 10.0,
                         truncate_bytes: int = WAL_TRUNCATE_BYTES) -> None:
        """PASSIVE checkpoints when idle or every ``max_interval`` s; once the WAL
        file passes ``truncate_bytes``, a TRUNCATE checkpoint (it waits for the
        writer, copies every frame and empties the file). Under continuous load
        PASSIVE alone never let the WAL restart: it reached 1.94 GB beside a
        65.6 MB database (issue 13)."""
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=10000")
        last = time.monotonic()
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            try:
                if self.wal_bytes() > truncate_bytes and not self._readers:
                    # Under the store's lock, on its own connection: no commit of
                    # this process can start meanwhile, so the checkpoint is not
                    # starved by back-to-back writers (measured: without the lock
                    # TRUNCATE kept timing out and the WAL reached 237 MB during
                    # 1e6 reports at 20k/s). Commits wait for one checkpoint of
                    # ``truncate_bytes`` at most, and usually for much less: a
                    # PASSIVE checkpoint first copies what it can while commits go
                    # on, so the locked TRUNCATE copies only the frames since
                    # (issue 44: locked TRUNCATEs of 80-120 ms under a steady load,
                    # store-level soak at 10^6 rows).
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    with self._lock:
                        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                    last = now
                elif self._dirty and (now - self._last_commit > idle_seconds or now - last > max_interval):
                    self._dirty = False
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    last = now
            except sqlite3.Error:  # busy or disk full: the next pass tries again
                continue

    def reclaim(self) -> None:
        with self._lock, storage_errors(sqlite3.OperationalError):
            # executescript steps the pragma to completion; execute() would free one page.
            self._conn.executescript("PRAGMA incremental_vacuum;")

    def wal_bytes(self) -> int:
        """Size of the write-ahead log file (0 if there is none)."""
        try:
            return os.path.getsize(self.path + "-wal")
        except OSError:
            return 0

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock, storage_errors(sqlite3.OperationalError):
            return self._conn.execute(sql, params).fetchall()

    def _columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self._execute(f"PRAGMA table_info({table})")}

    def _has_table(self, name: str) -> bool:
        return bool(self._execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

    def _row_chunks(self, seq: int, chunk: int, ids: IdRange) -> Iterator[tuple[int, bytes]]:
        """One read transaction on a connection of its own (WAL: a snapshot that
        writers do not block), paged by message id, each page ONE statement
        step that concatenates its rows in SQLite. Fetching row by row releases
        and re-takes the GIL per row: with one busy Python thread beside it
        (the server's request threads, a Dask worker's event loop) that read
        fell from 724,863 to 2,279 rows/s; one step per page read 1,107,789
        alone and 1,044,878 contended (780k rows of the 10^8-row bench store).
        While it is open the checkpointer runs only PASSIVE checkpoints: a
        TRUNCATE checkpoint waits for readers, and it holds the store's lock,
        so every commit would wait with it."""
        lo, hi = ids
        upper = " AND message_id < ?" if hi is not None else ""
        page = ("SELECT CAST(group_concat(report, x'') AS BLOB), count(*), max(message_id) FROM (SELECT report, "
                "message_id FROM report_rows WHERE round_seq = ? AND message_id {op} ?" + upper
                + " ORDER BY message_id LIMIT ?)")
        with self._readers_lock:
            self._readers += 1
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            with storage_errors(sqlite3.OperationalError):
                conn.execute("PRAGMA busy_timeout=10000")
                conn.execute("BEGIN")
                op, after = ">=", lo if lo is not None else b""
                while True:
                    raw, count, last = conn.execute(page.format(op=op), (seq, after, *(hi,) * bool(upper),
                                                                         chunk)).fetchone()
                    if not count:
                        break
                    yield int(count), bytes(raw)
                    op, after = ">", bytes(last)
                conn.execute("COMMIT")
        finally:
            conn.close()
            with self._readers_lock:
                self._readers -= 1

    def _in_transaction(self, work: Callable[[Run], T]) -> T:
        with self._lock, storage_errors(sqlite3.OperationalError):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                out = work(lambda sql, params: self._conn.execute(sql, params).fetchall())
                self._conn.execute("COMMIT")
                self._last_commit, self._dirty = time.monotonic(), True
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return out
