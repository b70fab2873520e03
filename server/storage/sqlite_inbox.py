"""SQLite's inbox (issue 42, Build 4): new report rows are appended to a
table without a key, retried ids refused by exact in-memory id sets
(``id_sets.py``), and the rows merged into ``report_rows`` in key order when
the store is idle. ``InboxStore`` holds that part of ``SQLiteStore``
(``sqlite.py``: connections, transactions, checkpoints, reads)."""

from __future__ import annotations

import abc
import functools
import json
import sqlite3
import threading
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.server.storage.id_sets import IdSets
from shoal.server.storage.store import ROW_COLUMNS, Run, Store, StoreError, storage_errors

INBOX_ROWS = 65_536  # inbox rows that start a merge pass into ``report_rows`` once the store is idle
INBOX_MAX_ROWS = 1 << 22  # ... and that start one under load (in the commit that reaches twice this: at once)
SPLIT_BYTES = 4 << 20  # bytes of keys and rows bound to one statement at most (``_insert_rows``)
POSITIONS = 1 << 16  # rows of the writer's positions table: rows one statement inserts at most (``_insert_rows``)
MERGE_IDLE_SECONDS = 0.25  # no report write for this long: the store is idle
MERGE_SLICE_SECONDS = 0.005  # a merge slice's statements aim at this (its commit's fsync comes on top)
MERGE_PAUSE_SECONDS = 0.005  # between slices: commits waiting for the lock take it
MERGE_SLICE_ROWS = (64, 65_536)  # the range a slice's size adapts in
_INBOX_TABLE = """CREATE TABLE IF NOT EXISTS report_inbox (
    round_seq BIGINT NOT NULL, message_id BLOB NOT NULL, report BLOB NOT NULL, step BIGINT)"""
_IN_SLICE = "rowid IN (SELECT value FROM json_each(?))"  # a slice: inbox rowids, as one JSON array parameter
# 0 .. POSITIONS - 1, a temporary table of the writer's connection (never in the store's file)
_POSITIONS_TABLE = "CREATE TEMP TABLE IF NOT EXISTS inbox_positions (i INTEGER PRIMARY KEY)"
_FILL_POSITIONS = ("INSERT INTO temp.inbox_positions WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s "
                   "WHERE i + 1 < ?) SELECT i FROM s")
# n rows from two parameters: ?3 the n 16-byte keys end to end, ?4 the n rows of ?5 bytes each (``_insert_rows``)
_SPLIT_INSERT = ("{verb} {table} (round_seq, message_id, report, step) "
                 "SELECT ?1, substr(?3, 16 * i + 1, 16), substr(?4, ?5 * i + 1, ?5), ?6 FROM temp.inbox_positions "
                 "WHERE i < ?2")


class InboxStore(Store):
    """The inbox half of the SQLite store.

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
    path: str
    _background: bool

    def _init_inbox_state(self, id_budget: int) -> None:
        """The inbox's bookkeeping (``SQLiteStore.__init__``, before the schema)."""
        self._ids = IdSets(id_budget)
        self._in_inbox = 0  # rows this process put in the inbox, less those merged since (when to merge)
        self._inbox_count_lock = threading.Lock()
        self._writing = 0  # report writes in progress (``_add_row_groups``)
        self._last_write = time.monotonic()  # when the last one ended
        self._tx_inbox = 0  # rows the open transaction appended to the inbox (since its merge, if it merged)
        self._tx_merged = False  # the open transaction merged the whole inbox
        # the open transaction's new inbox rows by (round seq, step), appended by ``_end_groups``
        self._tx_appends: dict[tuple[int, int | None], tuple[list[bytes], list[bytes]]] = {}
        self._merge_wanted = threading.Event()
        self._pass_lock = threading.Lock()  # one merge pass at a time (the merger's or settle's)
        self._slice_rows = 1024

    @abc.abstractmethod
    def _connect(self) -> sqlite3.Connection:
        """A connection of its own to the store's file (a reader's)."""

    def _init_inbox(self) -> None:
        """The append-only inbox. A store made before it (a keyed ``WITHOUT
        ROWID`` inbox) has its waiting rows merged and the table replaced, in
        one transaction."""
        old = self._execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'report_inbox'")
        if old and "WITHOUT ROWID" in str(old[0][0]).upper():
            self._in_transaction(self._replace_keyed_inbox)
        self._execute(_INBOX_TABLE)
        self._execute("CREATE INDEX IF NOT EXISTS report_inbox_round ON report_inbox (round_seq)")
        self._execute(_POSITIONS_TABLE)
        if not self._execute("SELECT 1 FROM temp.inbox_positions LIMIT 1"):
            self._execute(_FILL_POSITIONS, (POSITIONS,))

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
            if self._waiting():
                self._merge(run)
            # the key stays a backstop; the set already refused every stored id
            return self._insert_rows(run, "report_rows", seq, keys, packed, step, ignore=True)
        pending_keys, pending_rows = self._tx_appends.setdefault((seq, step), ([], []))
        pending_keys.extend(keys)
        pending_rows.extend(packed)
        return len(keys)

    def _end_groups(self, run: Run) -> None:
        """Append the transaction's new rows to the inbox: one statement per
        round whatever the groups (``_insert_rows``: at most ``SPLIT_BYTES``
        and ``POSITIONS`` rows each; each statement is a GIL release and
        re-take for the committing thread, which under load waits for the
        request threads each time); then a backlog the merger lost to (twice
        ``inbox_max_rows``) is merged in this transaction."""
        self._append_pending(run)
        if self._waiting() >= 2 * self.inbox_max_rows:
            self._merge(run)

    def _append_pending(self, run: Run) -> None:
        appends, self._tx_appends = self._tx_appends, {}
        for (seq, step), (keys, packed) in appends.items():
            self._tx_inbox += self._insert_rows(run, "report_inbox", seq, keys, packed, step, ignore=False)

    def _insert_rows(self, run: Run, table: str, seq: int, keys: list[bytes], packed: list[bytes],
                     step: int | None, ignore: bool) -> int:
        """``Store._insert_rows`` as ONE statement of six parameters whatever
        the rows: the keys and the rows each bound as one blob, split back into
        rows by SQLite (``substr`` at each position of the writer's temporary
        ``inbox_positions`` table, in order), so the statement's text is the
        same every time (prepared once) and its step is one GIL release. A
        multi-row ``VALUES`` binds two parameters a row and is parsed anew for
        each row count (measured, SQLite 3.40, 7000-row commits into the inbox:
        2.08 us a row that way, 1.31 split from two blobs by a recursive CTE);
        a recursive CTE queues each position through an ephemeral table, which
        the positions table does not (8000-row commits, same run: 1.25-1.54 us
        of CPU a row against 1.95-2.20). Rows of unequal widths (no kind
        writes them) go the multi-row way."""
        if not keys:
            return 0
        width = len(packed[0]) if packed else 0
        if (len(keys) != len(packed) or not width or set(map(len, packed)) != {width}
                or set(map(len, keys)) != {16}):
            return super()._insert_rows(run, table, seq, keys, packed, step, ignore)
        sql = _SPLIT_INSERT.format(verb=self.insert_ignore if ignore else "INSERT INTO", table=table)
        # rows a statement: wide rows bind a few MB, not a group's all; at most a position each
        per = min(POSITIONS, max(1, SPLIT_BYTES // (16 + width)))
        new = 0
        for i in range(0, len(keys), per):
            part = keys[i:i + per]
            run(sql, (int(seq), len(part), b"".join(part), b"".join(packed[i:i + per]), width,
                      None if step is None else int(step)))
            new += int(run(self.inserted_sql, ())[0][0]) if ignore else len(part)
        return new

    def _waiting(self) -> int:
        """Inbox rows inside the open transaction (this process's count)."""
        return (0 if self._tx_merged else self._in_inbox) + self._tx_inbox

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
        self._tx_inbox, self._tx_merged = 0, True

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
        conn = self._connect()
        try:
            with storage_errors(sqlite3.OperationalError):
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
