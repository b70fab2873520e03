"""The embedded store: SQLite in WAL mode, fsync on every commit, and a
checkpointer that keeps the WAL file bounded (issue 13)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from shoal.server.storage.id_sets import ID_BUDGET
from shoal.server.storage.sqlite_inbox import InboxStore
from shoal.server.storage.store import (
    WAL_KEEP_BYTES,
    WAL_TRUNCATE_BYTES,
    IdRange,
    Run,
    StoreError,
    T,
    storage_errors,
)

CACHE_BYTES = 64 << 20  # the writing connection's page cache
BUSY_MS = 10_000  # how long a statement waits for another connection's lock


class SQLiteStore(InboxStore):
    """The embedded default: one file, WAL journal, fsync on every commit.

    The inbox (``sqlite_inbox.py``): new rows are appended to a table
    without a key and merged into ``report_rows`` in key order when the
    store is idle; retried ids are refused by exact id sets."""

    def __init__(self, path: str, read_only: bool = False, inbox_rows: int | None = None,
                 merge_in_background: bool = True, id_budget: int = ID_BUDGET) -> None:
        """``merge_in_background``: False merges a full inbox right after the
        commit that filled it, in the committing thread (tests that check where
        each row waits). ``id_budget``: message ids the dedup sets hold in all."""
        super().__init__()
        self.path = path
        self._read_only = read_only
        if inbox_rows is not None:
            if inbox_rows < 1:
                raise StoreError(f"inbox_rows must be >= 1, got {inbox_rows}")
            self.inbox_rows = inbox_rows
            self.inbox_max_rows = max(self.inbox_max_rows, inbox_rows)
        self._readers = 0  # snapshot reads in progress (``_row_chunks``): no TRUNCATE checkpoint meanwhile
        self._readers_lock = threading.Lock()
        if read_only:  # a Dask worker reading partitions of a store a server keeps (``factory.open_store``)
            if not os.path.exists(path):
                raise StoreError(f"no SQLite store at {path!r}")
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
            return
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        # Pages freed by deleted reports go back to the file system (``reclaim``);
        # takes effect for databases created from now on.
        self._conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        # ``report_rows`` is keyed by random message ids, so a merge writes
        # random leaf pages: SQLite's default 2 MiB page cache made most of them
        # a read from the file (measured: 116k rows/s at 2 MiB, 157k at 64 MiB,
        # 4000-row groups into a fresh table, issue 19).
        self._conn.execute(f"PRAGMA cache_size={-(CACHE_BYTES >> 10)}")
        # Checkpoints (copying the WAL into the database file, with an fsync)
        # run on their own thread, never inside a report's commit: an automatic
        # checkpoint made one commit in ~100 take 20-85 ms under load, and
        # every request waiting on that commit with it. They wait for a quiet
        # moment (no commit for ``idle_seconds``) and are forced every
        # ``max_interval`` seconds under continuous load.
        self._conn.execute("PRAGMA wal_autocheckpoint=0")
        # When the log restarts its file is cut back to this size: above the
        # restart threshold, so a restart under load cuts nothing (the file is
        # reused; an idle TRUNCATE empties it, ``_checkpoint_loop``).
        self._conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
        self._data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        self._init_inbox_state(id_budget)
        self._last_commit = time.monotonic()
        self._dirty = False
        self._background = merge_in_background
        self.init_schema()
        threading.Thread(target=self._checkpoint_loop, daemon=True, name="sqlite-checkpoint").start()
        if merge_in_background:
            threading.Thread(target=self._merge_loop, daemon=True, name="sqlite-merge").start()

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

    wal_restart_bytes = WAL_TRUNCATE_BYTES  # WAL frames past this: the log is made to restart

    def _checkpoint_loop(self, interval: float = 0.1, idle_seconds: float = 1.0) -> None:
        """A PASSIVE checkpoint every ``interval`` s after commits, on a
        connection of its own and without the store's lock: commits go on
        beside it, and each copies the frames committed since the last one.

        The log must also restart (a new commit written from its beginning,
        or it grows for ever: issue 13, 1.94 GB beside a 65.6 MB database with
        PASSIVE only), and SQLite restarts it only for a commit whose
        transaction began with every frame copied, which back-to-back commits
        never leave time for. So once the frames pass ``wal_restart_bytes``,
        PASSIVE passes first copy all but a few (``_catch_up``) and one more,
        under the store's lock on the writer's connection, copies the rest
        (3-12 ms; the next commit then restarts the log, its file kept at its
        size: ``journal_size_limit``). Issue 42: the locked TRUNCATE this
        replaces stopped every commit for 63-90 ms each 16 MB (it copies, then
        cuts and syncs the file), the batch load's p99 at 10^6 reports over
        16 connections. A TRUNCATE still empties the file once the store has
        had no commit for ``idle_seconds``. None of it while snapshot reads
        are open (``_readers``): they hold the log, and a TRUNCATE would wait
        for them holding the lock."""
        conn = self._connect()
        frame = int(conn.execute("PRAGMA page_size").fetchone()[0]) + 24  # a WAL frame: a page and its header
        while True:
            time.sleep(interval)
            try:
                if self._dirty:
                    self._dirty = False
                    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if row is not None and row[1] * frame > self.wal_restart_bytes and not self._readers:
                        self._catch_up(conn)
                        with self._lock:  # on the writer's connection (its next transaction restarts the log)
                            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                elif (time.monotonic() - self._last_commit > idle_seconds and self.wal_bytes() > 0
                      and not self._readers):
                    # On the writer's connection (a TRUNCATE elsewhere reads as another writer), without
                    # waiting: a reader of another process holding a snapshot makes it busy at once, and
                    # the next idle pass tries again, instead of a commit waiting behind the lock meanwhile.
                    with self._lock:
                        self._conn.execute("PRAGMA busy_timeout=0")
                        try:
                            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                        finally:
                            self._conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
            except sqlite3.Error:  # busy or disk full: the next pass tries again
                continue

    @staticmethod
    def _catch_up(conn: sqlite3.Connection, passes: int = 8, frames_left: int = 64) -> None:
        """PASSIVE checkpoints until at most ``frames_left`` WAL frames wait to
        be copied (each pass copies what the last one left, fewer while the
        disk copies faster than commits append), so the locked one after them
        copies little."""
        for _ in range(passes):
            row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if row is None or row[1] - row[2] <= frames_left:
                return

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

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        return conn

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
        conn = self._connect()
        try:
            with storage_errors(sqlite3.OperationalError):
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
        """One write transaction; the id sets see its additions only if it
        commits, and are dropped when another connection wrote the file since
        this one's last transaction (``PRAGMA data_version``)."""
        with self._lock, storage_errors(sqlite3.OperationalError):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
                if version != self._data_version:
                    self._ids.clear()
                    self._data_version = version
                self._ids.begin()
                self._tx_inbox, self._tx_merged = 0, False
                self._tx_appends = {}
                out = work(lambda sql, params: self._conn.execute(sql, params).fetchall())
                self._conn.execute("COMMIT")
                self._ids.commit()
                with self._inbox_count_lock:
                    self._in_inbox = self._waiting()
                self._last_commit, self._dirty = time.monotonic(), True
            except BaseException:
                self._ids.rollback()
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return out
