"""The embedded store: SQLite in WAL mode, fsync on every commit, and a
checkpointer that keeps the WAL file bounded (issue 13)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.server.storage.id_sets import ID_BUDGET, IdSets
from shoal.server.storage.store import (
    ROW_COLUMNS,
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
INBOX_ROWS = 65_536  # inbox rows that start a merge pass into ``report_rows`` once the store is idle
INBOX_MAX_ROWS = 1 << 22  # ... and that start one under load (in the commit that reaches twice this: at once)
APPEND_ROWS = 16_000  # inbox rows per statement (2 parameters each, under SQLite's 32766)
MERGE_IDLE_SECONDS = 0.25  # no commit for this long: the store is idle
MERGE_SLICE_SECONDS = 0.005  # a merge slice's statements aim at this (its commit's fsync comes on top)
MERGE_PAUSE_SECONDS = 0.005  # between slices: commits waiting for the lock take it
MERGE_SLICE_ROWS = (64, 65_536)  # the range a slice's size adapts in
_INBOX_TABLE = """CREATE TABLE IF NOT EXISTS report_inbox (
    round_seq BIGINT NOT NULL, message_id BLOB NOT NULL, report BLOB NOT NULL, step BIGINT)"""
_IN_SLICE = "rowid IN (SELECT value FROM json_each(?))"  # a slice: inbox rowids, as one JSON array parameter


class SQLiteStore(Store):
    """The embedded default: one file, WAL journal, fsync on every commit.

    New rows are appended to the inbox (``Store.inbox``): a table with no
    key but its rowid (and an index on the round, whose entries append too),
    so a commit writes about as many pages as its rows fill, where a keyed
    insert of random message ids writes a random page per row (issue 42:
    1000-row commits, SQLite alone, 9.3 ms into a keyed inbox, 13.8 with the
    lookup into ``report_rows`` that refused merged ids, 1.42 appended).
    Retried ids are refused by exact per-round sets of the stored ids
    (``id_sets.py``), so an id is stored once across both tables; a round
    too large for the sets' memory budget goes straight into
    ``report_rows``, refused by its key as before the inbox.

    The inbox is merged into ``report_rows`` in key order (each page of a
    round's rows written about once a pass) by a background pass
    (``_merge_loop``), when the store has been idle ``MERGE_IDLE_SECONDS``
    with ``inbox_rows`` waiting, or under load once ``inbox_max_rows`` wait;
    decode reads and ``message_ids`` merge it first (``settle``). A pass
    sorts the inbox's rowids by key on a reader connection (no lock held),
    then moves them in slices, each its own transaction of about
    ``MERGE_SLICE_SECONDS`` with a pause between them (issue 44: a merge
    inside a request's commit held the write lock 1.1-1.9 s at 10^6 rows).
    A slice moves its rows and deletes them from the inbox in one
    transaction, so a SIGKILL at any moment leaves each row in exactly one of
    the two tables."""

    inbox = "report_inbox"
    inbox_rows = INBOX_ROWS
    inbox_max_rows = INBOX_MAX_ROWS
    concat_reports = ("SELECT CAST(group_concat(report, x'') AS BLOB), count(*) FROM "
                      "(SELECT report, message_id FROM report_rows WHERE {where} UNION ALL "
                      "SELECT report, message_id FROM report_inbox WHERE {where} ORDER BY message_id)")

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
            self._conn.execute("PRAGMA busy_timeout=10000")
            return
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        # Pages freed by deleted reports go back to the file system (``reclaim``);
        # takes effect for databases created from now on.
        self._conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA busy_timeout=10000")
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
        # After a checkpoint lets the log restart, the file is cut back to this
        # size (otherwise it keeps its largest size for ever).
        self._conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
        self._ids = IdSets(id_budget)
        self._data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        self._in_inbox = 0  # rows this process put in the inbox, less those merged since (when to merge)
        self._inbox_count_lock = threading.Lock()
        self._writing = 0  # report writes in progress (``_add_row_groups``)
        self._last_write = time.monotonic()  # when the last one ended
        self._tx_inbox = 0  # rows the open transaction put in the inbox (-1: it merged the whole inbox)
        # the open transaction's new inbox rows by (round seq, step), appended by ``_end_groups``
        self._tx_appends: dict[tuple[int, int | None], tuple[list[bytes], list[bytes]]] = {}
        self._merge_wanted = threading.Event()
        self._pass_lock = threading.Lock()  # one merge pass at a time (the merger's or settle's)
        self._slice_rows = 1024
        self._last_commit = time.monotonic()
        self._dirty = False
        self._background = merge_in_background
        self.init_schema()
        threading.Thread(target=self._checkpoint_loop, daemon=True, name="sqlite-checkpoint").start()
        if merge_in_background:
            threading.Thread(target=self._merge_loop, daemon=True, name="sqlite-merge").start()

    # -- the inbox --
    def _init_inbox(self) -> None:
        """The append-only inbox. A store made before it (a keyed ``WITHOUT
        ROWID`` inbox) has its waiting rows merged and the table replaced, in
        one transaction."""
        old = self._execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'report_inbox'")
        if old and "WITHOUT ROWID" in str(old[0][0]).upper():
            self._in_transaction(self._replace_keyed_inbox)
        self._execute(_INBOX_TABLE)
        self._execute("CREATE INDEX IF NOT EXISTS report_inbox_round ON report_inbox (round_seq)")

    def _replace_keyed_inbox(self, run: Run) -> None:
        self._merge(run)
        run("DROP TABLE report_inbox", ())

    def _stored_ids(self, run: Run, seq: int) -> NDArray[np.void]:
        """The round's stored message ids in both tables (V16), in one statement step."""
        raw = run("SELECT CAST(group_concat(message_id, x'') AS BLOB) FROM (SELECT message_id FROM report_rows "
                  "WHERE round_seq = ? UNION ALL SELECT message_id FROM report_inbox WHERE round_seq = ?)",
                  (seq, seq))[0][0]
        return np.frombuffer(bytes(raw or b""), dtype="V16")

    def _insert_group(self, run: Run, seq: int, keys: list[bytes], packed: list[bytes], step: int | None,
                      bulk: int) -> int:
        """Append the group's new rows to the inbox (refused ids: the round's
        id set). A transaction of ``inbox_rows`` or more (a bulk load) goes
        straight into ``report_rows`` once the inbox is merged: through the
        inbox it would be written twice for nothing. A round without a set
        (past the budget) goes there too, its key refusing retried ids, once
        none of its rows wait in the inbox."""
        if not self._ids.load(seq, lambda: self._stored_ids(run, seq)):
            if run("SELECT 1 FROM report_inbox WHERE round_seq = ? LIMIT 1", (seq,)):
                self._merge(run)
            return self._insert_rows(run, "report_rows", seq, keys, packed, step, ignore=True)
        mask = self._ids.fresh(seq, keys)
        if mask is not None:
            keys = np.array(keys, dtype=object)[mask].tolist()
            packed = np.array(packed, dtype=object)[mask].tolist()
        if bulk >= self.inbox_rows:
            if self._tx_inbox >= 0 and (self._in_inbox or self._tx_inbox):
                self._merge(run)
            # the key stays a backstop; the set already refused every stored id
            return self._insert_rows(run, "report_rows", seq, keys, packed, step, ignore=True)
        pending_keys, pending_rows = self._tx_appends.setdefault((seq, step), ([], []))
        pending_keys.extend(keys)
        pending_rows.extend(packed)
        return len(keys)

    def _end_groups(self, run: Run) -> None:
        """Append the transaction's new rows to the inbox: one statement per
        ``APPEND_ROWS`` rows of a round, whatever the groups (each statement is
        a GIL release and re-take for the committing thread, which under load
        waits for the request threads each time); then a backlog the merger
        lost to (twice ``inbox_max_rows``) is merged in this transaction."""
        self._append_pending(run)
        if self._tx_inbox >= 0 and self._in_inbox + self._tx_inbox >= 2 * self.inbox_max_rows:
            self._merge(run)

    def _append_pending(self, run: Run) -> None:
        appends, self._tx_appends = self._tx_appends, {}
        for (seq, step), (keys, packed) in appends.items():
            for i in range(0, len(keys), APPEND_ROWS):
                new = self._insert_rows(run, "report_inbox", seq, keys[i:i + APPEND_ROWS],
                                        packed[i:i + APPEND_ROWS], step, ignore=False)
                if self._tx_inbox >= 0:
                    self._tx_inbox += new

    def _forget_rows(self, seq: int) -> None:
        self._ids.drop(seq)

    def _add_row_groups(self, groups: list[tuple[str, list[bytes], Any]], only_open: bool = False,
                        stamp: bool = False) -> list[int]:
        with self._inbox_count_lock:
            self._writing += 1
        try:
            counts = super()._add_row_groups(groups, only_open, stamp)
        finally:
            with self._inbox_count_lock:
                self._writing -= 1
                self._last_write = time.monotonic()
        if self._in_inbox >= self.inbox_rows:
            if self._background:
                self._merge_wanted.set()
            else:
                self._merge_pass()
        return counts

    def _merge(self, run: Run) -> None:
        """Move every inbox row into ``report_rows``, in key order (each page of
        the rounds' rows written once), inside the caller's transaction: a
        crash leaves them all in one table or the other. The id sets keep
        every id out of both tables but once, so ``OR IGNORE`` only keeps the
        merge from failing if that were ever broken. Rows this transaction
        has yet to append go in first."""
        self._append_pending(run)
        run(f"INSERT OR IGNORE INTO report_rows ({ROW_COLUMNS}) SELECT {ROW_COLUMNS} FROM report_inbox "
            "ORDER BY round_seq, message_id", ())
        run("DELETE FROM report_inbox", ())
        self._tx_inbox = -1

    def _merge_slice(self, run: Run, rowids: list[int]) -> int:
        """Move the inbox rows ``rowids`` (consecutive in key order) into
        ``report_rows`` inside the caller's transaction; returns how many moved
        (rows deleted meanwhile with their round are not there to move)."""
        slice_ids = json.dumps(rowids)
        run(f"INSERT OR IGNORE INTO report_rows ({ROW_COLUMNS}) SELECT {ROW_COLUMNS} FROM report_inbox "
            f"WHERE {_IN_SLICE} ORDER BY round_seq, message_id", (slice_ids,))
        run(f"DELETE FROM report_inbox WHERE {_IN_SLICE}", (slice_ids,))
        return int(run("SELECT changes()", ())[0][0])

    def _inbox_order(self) -> list[int]:
        """The rowids of the inbox's rows, in key order, sorted by SQLite on a
        reader connection (a snapshot: commits go on, no lock is held) and
        returned in one step as a JSON array."""
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            with storage_errors(sqlite3.OperationalError):
                conn.execute("PRAGMA busy_timeout=10000")
                text = conn.execute("SELECT json_group_array(rowid) FROM (SELECT rowid FROM report_inbox "
                                    "ORDER BY round_seq, message_id)").fetchone()[0]
        finally:
            conn.close()
        return list(json.loads(text))

    def _idle(self) -> bool:
        """No report write in progress, and none for ``MERGE_IDLE_SECONDS``
        (a write waiting on a checkpoint is not idleness)."""
        with self._inbox_count_lock:
            return not self._writing and time.monotonic() - self._last_write >= MERGE_IDLE_SECONDS

    def _merge_loop(self) -> None:
        """Run a merge pass when ``inbox_rows`` wait and the store is idle (the
        pass stops at the next report write, the rest waits for the next
        quiet moment), or when ``inbox_max_rows`` wait (to the end); woken by
        commits that reach ``inbox_rows``, checked every ``MERGE_IDLE_SECONDS``."""
        while True:
            self._merge_wanted.wait(MERGE_IDLE_SECONDS)
            self._merge_wanted.clear()
            backlog = self._in_inbox >= self.inbox_max_rows
            if not backlog and (self._in_inbox < self.inbox_rows or not self._idle()):
                continue
            try:
                self._merge_pass(while_idle=not backlog)
            except StoreError:  # storage unavailable now: the next wake tries again
                time.sleep(1.0)

    def _timed_slice(self, run: Run, rowids: list[int], spent: list[float]) -> int:
        """``_merge_slice``; its seconds appended to ``spent``."""
        t = time.perf_counter()
        out = self._merge_slice(run, rowids)
        spent.append(time.perf_counter() - t)
        return out

    def _merge_pass(self, while_idle: bool = False) -> int:
        """Every inbox row present when the pass starts moved into
        ``report_rows`` by slices in key order; each slice's size adapts so it
        holds the write lock ``MERGE_SLICE_SECONDS``. ``while_idle``: stop
        after the slice during which report writes came (the rest stays in the
        inbox, each row in one table). Returns the rows moved."""
        lo, hi = MERGE_SLICE_ROWS
        total = 0
        with self._pass_lock:
            order = self._inbox_order()
            at = 0
            while at < len(order):
                spent: list[float] = []
                size = min(max(self._slice_rows, lo), hi)
                moved = self._in_transaction(functools.partial(self._timed_slice, rowids=order[at:at + size],
                                                               spent=spent))
                at += size
                with self._inbox_count_lock:
                    self._in_inbox = max(0, self._in_inbox - moved)
                total += moved
                # Geometric step toward the size that takes MERGE_SLICE_SECONDS.
                scale = (MERGE_SLICE_SECONDS / max(spent[0], 1e-4)) ** 0.5
                self._slice_rows = int(min(max(self._slice_rows * scale, lo), hi))
                if at < len(order):
                    if while_idle and (self._writing or time.monotonic() - self._last_write < MERGE_IDLE_SECONDS):
                        break
                    time.sleep(MERGE_PAUSE_SECONDS)
        return total

    def settle(self) -> None:
        """Merge the inbox into ``report_rows`` now (a read-only store never
        writes: its writer settles before its readers read, ``RoundService.cluster``
        before a Dask decode). Every row in the inbox when it starts is merged
        when it returns (in slices: ingestion into other rounds goes on between them)."""
        if self._read_only:
            return
        if self._execute("SELECT 1 FROM report_inbox LIMIT 1"):
            self._merge_pass()

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
                    with self._lock:  # on the writer's connection: a TRUNCATE elsewhere reads as another writer
                        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
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
                self._tx_inbox = 0
                self._tx_appends = {}
                out = work(lambda sql, params: self._conn.execute(sql, params).fetchall())
                self._conn.execute("COMMIT")
                self._ids.commit()
                with self._inbox_count_lock:
                    self._in_inbox = 0 if self._tx_inbox < 0 else self._in_inbox + self._tx_inbox
                self._last_commit, self._dirty = time.monotonic(), True
            except BaseException:
                self._ids.rollback()
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return out
