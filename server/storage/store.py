"""Durable storage of rounds, reports and results: SQLite (default) or PostgreSQL.

A report acknowledged with 2xx has been committed (SQLite in WAL mode with
synchronous=FULL; PostgreSQL's default durable commit). A report is one
fixed-width binary row (``report_rows.py``) keyed by (the round's small
integer ``seq``, the 16 bytes of its message id), so a retried message is
acknowledged but never stored twice, and decoding reads a round back with
one vectorised pass. Device identities are never stored: a row has no sender.

SQLite takes new rows into an append-only inbox first (``Store.inbox``,
``sqlite_inbox.py``), deduplicated against exact per-round sets of the
stored ids (``id_sets.py``), and merges it into ``report_rows`` in key order
when the store is idle (issue 42: a keyed insert of random ids writes a
random page per row; 1000-row commits took 9.3 ms keyed, 1.42 appended). Counts and deletions see both tables,
and so does a step's close (``load_steps``: a read that must not write);
every decode read (``iter_rows``) and ``message_ids`` merge the inbox first
(``settle``), so they read one table.

The SQL both back ends share is here (which is why this module is over 300
lines); ``sqlite.py`` and ``postgres.py`` hold their connections,
transactions and the handful of dialect differences.
"""

from __future__ import annotations

import abc
import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.base import DECODE_CHUNK, decode_chunk_rows
from shoal.common.wire.messages import ReportBatch
from shoal.server.storage import report_rows
from shoal.server.storage.report_rows import StoreError

ROUND_STATES = ("open", "closed", "decoding", "done", "failed")
WAL_TRUNCATE_BYTES = 16 << 20  # WAL frames past this: the log is made to restart (SQLite's ``_checkpoint_loop``)
WAL_KEEP_BYTES = 32 << 20  # a restarting log's file is cut back to this (above the last: under load, to nothing)
_CHUNK = 8000  # rows (x 2 parameters) per statement: under SQLite's 32766 and PostgreSQL's 65535
NOT_OPEN = -1  # ``_add_row_groups``: the group's round was not open when the transaction read it
T = TypeVar("T")
Run = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
IdRange = tuple[bytes | None, bytes | None]  # message ids >= low and < high; None: unbounded
Packed = tuple[str, list[bytes], list[bytes]]  # (round id, 16-byte message keys, rows): a group as stored

# The table of report rows, keyed by (round, message id).
_ROWS_TABLE = """CREATE TABLE IF NOT EXISTS {rows} (
        round_seq BIGINT NOT NULL, message_id {{blob}} NOT NULL, report {{blob}} NOT NULL, step BIGINT,
        PRIMARY KEY (round_seq, message_id)){{without_rowid}}"""
ROW_COLUMNS = "round_seq, message_id, report, step"
_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS rounds (
        id TEXT PRIMARY KEY, config TEXT NOT NULL, state TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL, result TEXT, error TEXT,
        lease_holder TEXT, lease_until DOUBLE PRECISION, seq BIGINT UNIQUE)""",
    _ROWS_TABLE.format(rows="report_rows"),
    """CREATE TABLE IF NOT EXISTS round_steps (
        round_seq BIGINT NOT NULL, step BIGINT NOT NULL, release TEXT NOT NULL,
        PRIMARY KEY (round_seq, step))""",
    # Every result a round's decodes wrote, oldest first (issue 44: a release is
    # kept; a re-decode, post-processing only, adds a version and never replaces one).
    """CREATE TABLE IF NOT EXISTS round_results (
        round_seq BIGINT NOT NULL, version BIGINT NOT NULL, created DOUBLE PRECISION NOT NULL,
        result TEXT NOT NULL, PRIMARY KEY (round_seq, version))""",
]
# States a decode may start from: a first decode (open, closed, or after a
# failed one, which released nothing). ``done`` only with ``again`` (a re-decode
# the round's kind allows: post-processing, ``ServerKind.decode_draws_noise``).
DECODABLE_STATES = ("open", "closed", "failed")


class UnknownRound(StoreError):
    """No round with that id."""


class StorageUnavailable(StoreError):
    """The database cannot write or answer now (disk full, read-only, locked,
    connection lost): nothing of the request was stored; retry later (503)."""


@dataclass(frozen=True)
class RoundRow:
    id: str
    config: dict[str, Any]
    state: str
    created: float
    reports: int
    result: dict[str, Any] | None
    error: str | None


class Store(abc.ABC):
    """SQL shared by both back ends; subclasses supply the connection and dialect."""

    placeholder = "?"
    blob = "BLOB"
    without_rowid = " WITHOUT ROWID"
    insert_ignore = "INSERT OR IGNORE INTO"
    on_conflict = ""
    lock_shared = ""  # SQLite: the write transaction already excludes every other writer
    # How an INSERT's stored-row count is read: this statement after it (SQLite:
    # one step; a RETURNING row per stored row would be a step, and a GIL
    # release, each), or "" for the INSERT's RETURNING rows (PostgreSQL sends them at once).
    inserted_sql = "SELECT changes()"
    # One row: the selected rows' reports concatenated in message-id order, and their count;
    # ``{where}`` once per table of ``_tables()`` (SQLite's reads the inbox too).
    concat_reports = ("SELECT CAST(group_concat(report, x'') AS BLOB), count(*) FROM "
                      "(SELECT report FROM report_rows WHERE {where} ORDER BY message_id)")
    integrity_errors: tuple[type[BaseException], ...] = (sqlite3.IntegrityError,)
    # Where new rows go first ("": straight into ``report_rows``; SQLite's
    # append-only inbox, ``sqlite_inbox.py``); counts, deletions and step reads see it too.
    inbox = ""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seqs: dict[str, int] = {}
        self._read_only = False

    def _tables(self) -> tuple[str, ...]:
        """Every table a round's rows may sit in."""
        return ("report_rows", self.inbox) if self.inbox else ("report_rows",)

    def _count_sql(self, where: str) -> str:
        """One statement counting the rows ``where`` (with ``?`` for the round's seq) over every table."""
        return "SELECT " + " + ".join(f"(SELECT COUNT(*) FROM {t} WHERE round_seq = {where})" for t in self._tables())

    @abc.abstractmethod
    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in its own committed transaction; return its rows."""

    @abc.abstractmethod
    def _row_chunks(self, seq: int, chunk: int, ids: IdRange) -> Iterator[tuple[int, bytes]]:
        """The ``report`` column of the round ``seq``'s rows with message ids in
        ``ids``, in message-id order, as (count, concatenated bytes) of at most
        ``chunk`` rows, all from one snapshot of the database, read on a
        connection of its own (ingestion goes on)."""

    @abc.abstractmethod
    def _in_transaction(self, work: Callable[[Run], T]) -> T:
        """Call ``work(run)`` inside ONE write transaction (one commit, one
        fsync); ``run(sql, params)`` executes a statement and returns its rows."""

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.placeholder)

    def init_schema(self) -> None:
        for stmt in _SCHEMA:
            self._execute(stmt.format(blob=self.blob, without_rowid=self.without_rowid))
        self._init_inbox()
        # Stores made before issue 13 gain the lease and seq columns, and their
        # reports move into ``report_rows``.
        have = self._columns("rounds")
        for col, kind in (("lease_holder", "TEXT"), ("lease_until", "DOUBLE PRECISION"), ("seq", "BIGINT"),
                          ("steps", "BIGINT")):
            if col not in have:
                self._execute(f"ALTER TABLE rounds ADD COLUMN {col} {kind}")
        self._execute("CREATE UNIQUE INDEX IF NOT EXISTS rounds_seq ON rounds (seq)")
        # A continual round's event rows carry their step (``add_events``) so a step's close
        # reads its own rows (``load_steps``); no other row has one, so the index costs them nothing.
        if "step" not in self._columns("report_rows"):
            self._in_transaction(self._add_step_column)
        self._execute("CREATE INDEX IF NOT EXISTS report_rows_step ON report_rows (round_seq, step) "
                      "WHERE step IS NOT NULL")
        if self._has_table("reports"):
            self._in_transaction(self._migrate_reports)
        self.settle()  # rows a previous process left in the inbox

    def _init_inbox(self) -> None:
        """Create the inbox table (none here: rows go straight into ``report_rows``)."""
        return None

    def _add_step_column(self, run: Run) -> None:
        """Stores made before the step index: the column, and every continual
        round's event rows stamped in it from their word 0 (little-endian); one
        transaction, so a crash leaves the column absent and this runs again.
        A statement per row: it runs once per store, on the continual rounds only."""
        run("ALTER TABLE report_rows ADD COLUMN step BIGINT", ())
        for seq, config in run("SELECT seq, config FROM rounds WHERE seq IS NOT NULL", ()):
            if json.loads(config).get("kind") != "continual":
                continue
            rows = run(self._sql("SELECT message_id, report FROM report_rows WHERE round_seq = ?"), (seq,))
            for i in range(0, len(rows), _CHUNK):
                part = rows[i:i + _CHUNK]
                steps = np.frombuffer(b"".join(bytes(r[1])[:8] for r in part), dtype="<u8")
                for (mid, _), step in zip(part, steps.tolist(), strict=True):
                    run(self._sql("UPDATE report_rows SET step = ? WHERE round_seq = ? AND message_id = ?"),
                        (step, seq, bytes(mid)))

    def _migrate_reports(self, run: Run) -> None:
        """Give every round a seq, copy the old seven-column ``reports`` into
        ``report_rows`` (packed), and drop it; one transaction."""
        unnumbered = [r[0] for r in run("SELECT id FROM rounds WHERE seq IS NULL ORDER BY created", ())]
        top = int(run("SELECT COALESCE(MAX(seq), 0) FROM rounds", ())[0][0])
        for i, rid in enumerate(unnumbered):
            run(self._sql("UPDATE rounds SET seq = ? WHERE id = ?"), (top + 1 + i, rid))
        for rid, seq in run("SELECT id, seq FROM rounds", ()):
            rows = run(self._sql("SELECT message_id, hist_level, hist_seed, hist_bucket, vec_level, vec_row, vec "
                                 "FROM reports WHERE round_id = ?"), (rid,))
            if not rows:
                continue
            keys = report_rows.message_keys([str(r[0]) for r in rows])
            if all(r[1] == -1 and r[4] == -1 for r in rows):  # payload rows (shares, sketches)
                packed = [bytes(r[6]) for r in rows]
            else:
                n = len(rows)
                cols = np.array([r[1:6] for r in rows], dtype=np.int64).reshape(n, 5)
                pairs = np.zeros((n, 2), dtype="<u8")
                has = cols[:, 3] >= 0
                if has.any():
                    pairs[has] = np.frombuffer(b"".join(bytes(r[6]) for r in rows if r[4] >= 0),
                                               dtype="<u8").reshape(-1, 2)
                batch = ReportBatch(rid, cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], cols[:, 4], np.zeros((n, 0)),
                                    pairs[:, 0], np.where(has, pairs[:, 1].astype(np.int64), -1))
                packed = report_rows.pack_tree(batch)
            for i in range(0, len(rows), _CHUNK):
                chunk = list(zip([seq] * len(rows[i:i + _CHUNK]), keys[i:i + _CHUNK], packed[i:i + _CHUNK],
                                 strict=True))
                values = ",".join(["(?, ?, ?)"] * len(chunk))
                run(self._sql(f"INSERT INTO report_rows (round_seq, message_id, report) VALUES {values}"),
                    tuple(v for row in chunk for v in row))
        run("DROP TABLE reports", ())

    @abc.abstractmethod
    def _has_table(self, name: str) -> bool:
        """Does the store have a table of that name?"""

    @abc.abstractmethod
    def _columns(self, table: str) -> set[str]:
        """Names of the columns of ``table`` (``rounds``, ``report_rows``)."""

    # -- decode leases --
    # A decode holds a lease (holder, expiry) on its round, renewed while it
    # runs; the result is written only by the holder, in the same statement
    # that ends the lease. A round whose holder died (lease expired, or a dead
    # process on this host) goes back to ``closed`` (issue 13: a SIGKILL during
    # /cluster used to leave the round ``decoding`` for ever).
    def take_lease(self, round_id: str, holder: str, until: float, now: float, again: bool = False) -> bool:
        """Move the round to ``decoding`` under ``holder``: from a state that has
        released nothing (``DECODABLE_STATES``), from a stranded decode (lease
        expired), and from ``done`` only when ``again`` (a re-decode; the done
        result stays in place until a new one replaces it, and in ``results``)."""
        states = ", ".join(f"'{s}'" for s in DECODABLE_STATES + (("done",) if again else ()))
        rows = self._execute(self._sql(
            "UPDATE rounds SET state = 'decoding', lease_holder = ?, lease_until = ?, error = NULL "
            f"WHERE id = ? AND (state IN ({states}) OR (state = 'decoding' AND "
            "(lease_until IS NULL OR lease_until < ?))) RETURNING id"),
            (holder, until, round_id, now))
        return bool(rows)

    def renew_lease(self, round_id: str, holder: str, until: float) -> bool:
        """Extend a lease; False if ``holder`` no longer holds it."""
        rows = self._execute(self._sql(
            "UPDATE rounds SET lease_until = ? WHERE id = ? AND state = 'decoding' AND lease_holder = ? RETURNING id"),
            (until, round_id, holder))
        return bool(rows)

    def end_lease(self, round_id: str, holder: str, state: str, result: dict[str, Any] | None = None,
                  error: str | None = None) -> bool:
        """Write the decode's outcome and end the lease, atomically; False if
        ``holder`` lost the lease (then nothing is written). A new result is
        also appended to ``round_results``; without one the round's earlier
        result (a re-decode that failed) stays as it was."""
        if state not in ROUND_STATES:
            raise StoreError(f"unknown round state {state!r}")
        text = json.dumps(result) if result is not None else None

        def work(run: Run) -> bool:
            rows = run(self._sql(
                "UPDATE rounds SET state = ?, result = COALESCE(?, result), error = ?, lease_holder = NULL, "
                "lease_until = NULL WHERE id = ? AND state = 'decoding' AND lease_holder = ? RETURNING seq"),
                (state, text, error, round_id, holder))
            if rows and text is not None:
                run(self._sql("INSERT INTO round_results (round_seq, version, created, result) SELECT ?, "
                              "COALESCE(MAX(version), 0) + 1, ?, ? FROM round_results WHERE round_seq = ?"),
                    (rows[0][0], time.time(), text, rows[0][0]))
            return bool(rows)

        return self._in_transaction(work)

    def results(self, round_id: str) -> list[tuple[int, float, dict[str, Any]]]:
        """(version, written at, result) of every result the round's decodes
        wrote, oldest first (a round decoded before this table: its one result)."""
        rows = self._execute(self._sql(
            "SELECT r.version, r.created, r.result FROM round_results r JOIN rounds d ON d.seq = r.round_seq "
            "WHERE d.id = ? ORDER BY r.version"), (round_id,))
        if rows:
            return [(int(v), float(c), json.loads(t)) for v, c, t in rows]
        row = self.get_round(round_id)
        return [(1, row.created, row.result)] if row.result is not None else []

    def leases(self) -> list[tuple[str, str, float]]:
        """(round, holder, expiry) of every round in ``decoding``."""
        rows = self._execute("SELECT id, lease_holder, lease_until FROM rounds WHERE state = 'decoding'")
        return [(str(r[0]), str(r[1] or ""), float(r[2] or 0.0)) for r in rows]

    def free_lease(self, round_id: str, holder: str) -> bool:
        """A stranded decode's round goes back to ``closed`` (if ``holder`` still
        holds it), or to ``done`` when it was a re-decode (its result is kept)."""
        rows = self._execute(self._sql(
            "UPDATE rounds SET state = CASE WHEN result IS NULL THEN 'closed' ELSE 'done' END, "
            "lease_holder = NULL, lease_until = NULL, "
            "error = 'decode interrupted (its server stopped); cluster again' "
            "WHERE id = ? AND state = 'decoding' AND COALESCE(lease_holder, '') = ? RETURNING id"),
            (round_id, holder))
        return bool(rows)

    # -- rounds --
    def create_round(self, round_id: str, config: dict[str, Any]) -> None:
        """A new open round, numbered one past the largest ``seq`` (a replica
        that races another for the same number tries again)."""
        for attempt in range(5):
            try:
                self._execute(self._sql(
                    "INSERT INTO rounds (id, config, state, created, seq) "
                    "VALUES (?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM rounds))"),
                    (round_id, json.dumps(config), "open", time.time()))
                return
            except self.integrity_errors:
                if attempt == 4:
                    raise

    def get_round(self, round_id: str) -> RoundRow:
        rows = self._execute(
            self._sql("SELECT id, config, state, created, result, error FROM rounds WHERE id = ?"),
            (round_id,),
        )
        if not rows:
            raise UnknownRound(f"unknown round {round_id!r}")
        return self._row(rows[0])

    def get_state(self, round_id: str) -> str:
        """The round's state alone (cheap: no report count)."""
        rows = self._execute(self._sql("SELECT state FROM rounds WHERE id = ?"), (round_id,))
        if not rows:
            raise UnknownRound(f"unknown round {round_id!r}")
        return str(rows[0][0])

    def list_rounds(self) -> list[RoundRow]:
        rows = self._execute("SELECT id, config, state, created, result, error FROM rounds ORDER BY created")
        return [self._row(r) for r in rows]

    def list_rounds_page(self, limit: int, before: tuple[float, str] | None = None) -> list[RoundRow]:
        """At most ``limit`` rounds, newest first: ordered by (created, id)
        descending, those strictly after ``before`` (the (created, id) of the
        last round of the previous page) in that order. Keyset paging (issue
        39, ``GET /rounds``): no OFFSET to count through, and a round created
        or deleted between pages neither repeats nor skips another; the id
        breaks ties between rounds created in the same instant. (``rounds`` has
        no index on ``created``: each page sorts the table, a few ms at 2,000
        rounds.)"""
        if before is None:
            rows = self._execute(self._sql("SELECT id, config, state, created, result, error FROM rounds "
                                           "ORDER BY created DESC, id DESC LIMIT ?"), (limit,))
        else:
            created, rid = before
            rows = self._execute(self._sql("SELECT id, config, state, created, result, error FROM rounds "
                                           "WHERE created < ? OR (created = ? AND id < ?) "
                                           "ORDER BY created DESC, id DESC LIMIT ?"), (created, created, rid, limit))
        return [self._row(r) for r in rows]

    def list_open_rounds(self, limit: int) -> list[tuple[str, dict[str, Any], float]]:
        """(id, config, created) of at most ``limit`` open rounds, newest first
        (``GET /rounds/open``, the devices' public list; issue 40). Nothing
        else of the row: no report count, result or error."""
        rows = self._execute(self._sql("SELECT id, config, created FROM rounds WHERE state = 'open' "
                                       "ORDER BY created DESC, id DESC LIMIT ?"), (limit,))
        return [(r[0], json.loads(r[1]), float(r[2])) for r in rows]

    def _row(self, r: tuple[Any, ...]) -> RoundRow:
        count = self._execute(self._sql(self._count_sql("(SELECT seq FROM rounds WHERE id = ?)")),
                              (r[0],) * len(self._tables()))
        return RoundRow(
            id=r[0],
            config=json.loads(r[1]),
            state=r[2],
            created=float(r[3]),
            reports=int(count[0][0]),
            result=json.loads(r[4]) if r[4] else None,
            error=r[5],
        )

    def set_state(self, round_id: str, state: str, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        if state not in ROUND_STATES:
            raise StoreError(f"unknown round state {state!r}")
        self._execute(
            self._sql("UPDATE rounds SET state = ?, result = ?, error = ? WHERE id = ?"),
            (state, json.dumps(result) if result is not None else None, error, round_id),
        )

    def delete_round(self, round_id: str, now: float | None = None) -> bool:
        """Delete a round and its reports in one transaction (UnknownRound if
        none). With ``now``: False, and nothing deleted, while a live decode
        lease (expiring after ``now``) holds the round."""

        def work(run: Run) -> bool:
            rows = run(self._sql("SELECT state, lease_until, seq FROM rounds WHERE id = ?"), (round_id,))
            if not rows:
                raise UnknownRound(f"unknown round {round_id!r}")
            if now is not None and rows[0][0] == "decoding" and rows[0][1] is not None and float(rows[0][1]) >= now:
                return False
            for table in self._tables():
                run(self._sql(f"DELETE FROM {table} WHERE round_seq = ?"), (rows[0][2],))
            self._forget_rows(int(rows[0][2]))
            run(self._sql("DELETE FROM round_steps WHERE round_seq = ?"), (rows[0][2],))
            run(self._sql("DELETE FROM round_results WHERE round_seq = ?"), (rows[0][2],))
            run(self._sql("DELETE FROM rounds WHERE id = ?"), (round_id,))
            self._seqs.pop(round_id, None)
            return True

        deleted = self._in_transaction(work)
        if deleted:
            self.reclaim()
        return deleted

    # -- retention --
    def purge_reports(self, before: float) -> list[str]:
        """Delete the reports of every ``done`` round created before ``before``
        (its result stays); returns those rounds. Then give the space back."""

        def work(run: Run) -> list[str]:
            held = " OR ".join(f"EXISTS (SELECT 1 FROM {t} WHERE {t}.round_seq = rounds.seq)" for t in self._tables())
            found = run(self._sql(f"SELECT id, seq FROM rounds WHERE state = 'done' AND created < ? AND ({held})"),
                        (before,))
            for _, seq in found:
                for table in self._tables():
                    run(self._sql(f"DELETE FROM {table} WHERE round_seq = ?"), (seq,))
                self._forget_rows(int(seq))
            return [str(r[0]) for r in found]

        ids = self._in_transaction(work)
        if ids:
            self.reclaim()
        return ids

    @contextlib.contextmanager
    def external_readers(self) -> Iterator[None]:
        """Other processes read snapshots of this store meanwhile (a distributed
        decode's workers); SQLite holds back its truncating checkpoints."""
        yield

    def _forget_rows(self, seq: int) -> None:
        """The round ``seq``'s rows are being deleted (SQLite drops its id set)."""
        return None

    def reclaim(self) -> None:
        """Return freed pages to the file system where the back end needs telling
        (SQLite's incremental vacuum; PostgreSQL's autovacuum does it itself)."""
        return None

    # -- reports --
    def _seq(self, round_id: str) -> int:
        """The round's integer key in ``report_rows`` (cached: it never changes)."""
        if round_id not in self._seqs:
            rows = self._execute(self._sql("SELECT seq FROM rounds WHERE id = ?"), (round_id,))
            if not rows:
                raise UnknownRound(f"unknown round {round_id!r}")
            self._seqs[round_id] = int(rows[0][0])
        return self._seqs[round_id]

    def add_reports(self, round_id: str, message_ids: list[str], batch: ReportBatch) -> int:
        """Store validated reports; returns how many were new (duplicates are ignored)."""
        return self.add_report_groups([(round_id, message_ids, batch)])[0]

    def add_report_groups(self, groups: list[tuple[str, list[str], ReportBatch]], only_open: bool = False) -> list[int]:
        """Several requests' reports in one transaction (group commit); new rows
        per group (``NOT_OPEN`` for a group refused by ``only_open``)."""
        return self.add_packed_groups([packed_reports(*group) for group in groups], only_open)

    def add_packed_groups(self, groups: list[Packed], only_open: bool = False) -> list[int]:
        """``add_report_groups`` of groups already packed (``packed_reports``)."""
        return self._add_row_groups(list(groups), only_open)

    def add_payloads(self, round_id: str, message_ids: list[str], rows: NDArray[np.uint64] | NDArray[np.float64],
                     only_open: bool = False) -> int:
        """Fixed-width reports that are one array row each (secure-sum shares
        of refine and shuffle-model sketch rounds, uint64; local sketches,
        float64), stored as little-endian words, in one transaction; returns
        how many were new (``NOT_OPEN`` if ``only_open`` refused them)."""
        return self._add_row_groups([(round_id, report_rows.message_keys(message_ids), report_rows.pack_words(rows))],
                                    only_open)[0]

    def add_events(self, round_id: str, message_ids: list[str], rows: NDArray[np.uint64]) -> int:
        """A continual round's event rows (uint64, word 0 left for the step): each
        row is stamped with the step open when the transaction reads the round
        (the closed steps + 1), under the same lock as its state, so a step
        closed by ``close_step`` never gains a row afterwards; stored only while
        the round is open. Returns how many were new (``NOT_OPEN`` if refused)."""
        return self._add_row_groups([(round_id, report_rows.message_keys(message_ids), rows)], True, stamp=True)[0]

    def _add_row_groups(self, groups: list[tuple[str, list[bytes], Any]], only_open: bool = False,
                        stamp: bool = False) -> list[int]:
        """(round, message keys, packed rows) of several groups in one
        transaction, skipping message ids already stored; new rows per group.

        ``only_open``: each round's state is read in the same transaction
        (PostgreSQL: ``FOR SHARE``, so a concurrent close or decode waits for
        this commit and a later one sees it; SQLite: the write lock), and the
        groups of a round that is not ``open`` are not stored (``NOT_OPEN``).
        This, not a process's cache, is what makes replicas agree (issue 19:
        a round closed on one replica was still taking reports on another).

        Few, large statements on purpose: each group's rows go in multi-row
        ``INSERT``s that skip ids already stored (``OR IGNORE`` / ``ON CONFLICT
        DO NOTHING``), and the database says how many it stored (SQLite's
        ``changes()``; PostgreSQL's ``RETURNING``, fetched in one round trip),
        which is the group's new count; no lookup first. Every statement step
        releases and re-takes the GIL, which under load costs up to a switch
        interval each (measured: row-by-row ``executemany`` made the commit
        thread the bottleneck), and a duplicate lookup before the insert read
        every key twice (issue 19: the store was half of a binary batch's cost).
        SQLite stores them its own way (``_insert_group``: an append-only inbox).
        """
        seqs = {rid: self._seq(rid) for rid, _, _ in groups}

        def work(run: Run) -> list[int]:
            shut: set[int] = set()
            open_step: dict[int, int] = {}
            if only_open:
                for seq in set(seqs.values()):
                    st = run(self._sql(f"SELECT state, COALESCE(steps, 0) FROM rounds WHERE seq = ?{self.lock_shared}"),
                             (seq,))
                    if not st or st[0][0] != "open":
                        shut.add(seq)
                    else:
                        open_step[seq] = int(st[0][1]) + 1
            bulk = sum(len(keys) for _, keys, _ in groups)
            counts = []
            for rid, keys, packed in groups:
                seq = seqs[rid]
                if seq in shut:
                    counts.append(NOT_OPEN)
                    continue
                step = None
                if stamp:  # ``add_events``: word 0 of every row, and its step column, is the step open now
                    rows = np.array(packed, dtype=np.uint64)
                    rows[:, 0] = step = open_step[seq]
                    packed = report_rows.pack_words(rows)
                if len(keys) != len(packed):
                    raise StoreError(f"{len(keys)} message ids for {len(packed)} rows")
                counts.append(self._insert_group(run, seq, keys, packed, step, bulk))
            self._end_groups(run)
            return counts

        return self._in_transaction(work)

    def _insert_group(self, run: Run, seq: int, keys: list[bytes], packed: list[bytes], step: int | None,
                      bulk: int) -> int:
        """Store one group's rows inside the caller's transaction, skipping ids
        already stored; returns how many were new. ``step``: the step column
        of every row (continual rounds), or None. ``bulk``: the rows of the
        whole transaction (SQLite's inbox skips a bulk load)."""
        return self._insert_rows(run, "report_rows", seq, keys, packed, step, ignore=True)

    def _end_groups(self, run: Run) -> None:
        """After the transaction's last group, inside it (SQLite writes its
        buffered inbox rows here)."""
        return None

    def _insert_rows(self, run: Run, table: str, seq: int, keys: list[bytes], packed: list[bytes],
                     step: int | None, ignore: bool) -> int:
        """Multi-row ``INSERT``s of (seq, key, row[, step]) into ``table``;
        ``ignore``: skip keys already there, and count the rows stored (else
        every row is stored: the caller deduplicated them)."""
        cols, tail = ("round_seq, message_id, report", "") if step is None else \
            ("round_seq, message_id, report, step", f", {int(step)}")
        new = 0
        for i in range(0, len(keys), _CHUNK):
            chunk_keys, chunk_rows = keys[i:i + _CHUNK], packed[i:i + _CHUNK]
            values = ",".join([f"({int(seq)}, ?, ?{tail})"] * len(chunk_keys))
            params: list[bytes] = [b""] * (2 * len(chunk_keys))
            params[0::2], params[1::2] = chunk_keys, chunk_rows
            if not ignore:
                run(self._sql(f"INSERT INTO {table} ({cols}) VALUES {values}"), tuple(params))
                new += len(chunk_keys)
                continue
            sql = f"{self.insert_ignore} {table} ({cols}) VALUES {values}{self.on_conflict}"
            if self.inserted_sql:
                run(self._sql(sql), tuple(params))
                new += int(run(self.inserted_sql, ())[0][0])
            else:
                new += len(run(self._sql(sql + " RETURNING 1"), tuple(params)))
        return new

    def settle(self) -> None:
        """Merge the inbox into ``report_rows`` now (nothing to do here: no
        inbox; SQLite's ``settle``)."""
        return None

    # -- continual rounds: steps (``server/rounds/steps.py``) --
    def close_step(self, round_id: str, horizon: int) -> int | None:
        """Close the open step of an open round whose closed steps are below
        ``horizon``; returns the step closed, or None if the round is not open
        or its horizon is reached. One statement: on PostgreSQL it waits for
        the transactions that stamped rows with this step (``FOR SHARE``)."""
        rows = self._execute(self._sql(
            "UPDATE rounds SET steps = COALESCE(steps, 0) + 1 WHERE id = ? AND state = 'open' "
            "AND COALESCE(steps, 0) < ? RETURNING steps"), (round_id, horizon))
        return int(rows[0][0]) if rows else None

    def steps_closed(self, round_id: str) -> int:
        rows = self._execute(self._sql("SELECT COALESCE(steps, 0) FROM rounds WHERE id = ?"), (round_id,))
        if not rows:
            raise UnknownRound(f"unknown round {round_id!r}")
        return int(rows[0][0])

    def add_step_release(self, round_id: str, step: int, release: dict[str, Any]) -> None:
        """A closed step's release; a second writer of the same step is ignored
        (every replica computes the same release, ``server/rounds/steps.py``)."""
        self._execute(self._sql(f"{self.insert_ignore} round_steps (round_seq, step, release) VALUES (?, ?, ?)"
                                f"{self.on_conflict}"), (self._seq(round_id), step, json.dumps(release)))

    def step_releases(self, round_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The stored releases of steps after ``since``, in step order."""
        rows = self._execute(self._sql("SELECT release FROM round_steps WHERE round_seq = ? AND step > ? ORDER BY step"),
                             (self._seq(round_id), since))
        return [json.loads(r[0]) for r in rows]

    def _packed(self, round_id: str) -> tuple[int, bytes]:
        chunks = list(self.iter_rows(round_id, DECODE_CHUNK))
        return sum(c for c, _ in chunks), b"".join(raw for _, raw in chunks)

    def iter_rows(self, round_id: str, chunk: int, ids: IdRange = (None, None)) -> Iterator[tuple[int, bytes]]:
        """A round's stored rows as (count, concatenated bytes), ``chunk`` rows at
        a time, in message-id order, all from one snapshot: a decode holds one
        chunk and its accumulator, never the whole round (issue 19), and sees
        exactly the reports committed when it started (a secure-sum round's
        shares all or none of a flush's transaction).

        ``ids`` = (low, high) keeps the rows whose 16-byte message id is
        >= low and < high (None: unbounded): one partition of a distributed
        decode (``rounds/reduction.py``), read by the primary key's range."""
        self.settle()
        yield from self._row_chunks(self._seq(round_id), chunk, ids)

    def iter_reports(self, round_id: str, chunk: int = DECODE_CHUNK,
                     ids: IdRange = (None, None)) -> Iterator[ReportBatch]:
        """``iter_rows`` of a tree round, each chunk a ``ReportBatch``."""
        for _, raw in self.iter_rows(round_id, chunk, ids):
            yield report_rows.unpack_tree(raw, round_id)

    def iter_payloads(self, round_id: str, width: int, dtype: type[np.uint64] | type[np.float64],
                      chunk: int | None = None, ids: IdRange = (None, None)) -> Iterator[NDArray[Any]]:
        """``iter_rows`` of a payload round, each chunk (rows, width) of ``dtype``
        (default: ``decode_chunk_rows`` of 8 width bytes)."""
        for count, raw in self.iter_rows(round_id, chunk or decode_chunk_rows(8 * width), ids):
            yield report_rows.unpack_words(raw, count, width, dtype)

    def load_payloads(self, round_id: str, width: int, dtype: type[np.uint64] | type[np.float64]) -> NDArray[Any]:
        """Every row stored by ``add_payloads`` for a round, (n, width) of ``dtype``."""
        count, raw = self._packed(round_id)
        return report_rows.unpack_words(raw, count, width, dtype)

    def load_steps(self, round_id: str, width: int, first: int, last: int) -> NDArray[np.uint64]:
        """A continual round's event rows stamped in steps ``first`` .. ``last``
        (``add_events``), in message-id order, through the step index: one
        statement whose rows the database concatenates (``concat_reports``;
        on SQLite over both tables: a step's close only reads, where merging
        the inbox first cost it an fsync, +1.4 ms a close at 100 events a step)."""
        rows = self._execute(self._sql(self.concat_reports.format(
            where="round_seq = ? AND step >= ? AND step <= ? AND step IS NOT NULL")),
            (self._seq(round_id), first, last) * len(self._tables()))  # the where clause once per table read
        count, raw = int(rows[0][1]), bytes(rows[0][0] or b"")
        return report_rows.unpack_words(raw, count, width, np.uint64)

    def load_reports(self, round_id: str, dim: int) -> ReportBatch:
        """Every tree report of a round, in message-id order."""
        return report_rows.unpack_tree(self._packed(round_id)[1], round_id)

    def message_ids(self, round_id: str) -> list[str]:
        """The message ids stored for a round (hex), in order."""
        self.settle()
        rows = self._execute(self._sql("SELECT message_id FROM report_rows WHERE round_seq = ? ORDER BY message_id"),
                             (self._seq(round_id),))
        return [bytes(r[0]).hex() for r in rows]

    def count_reports(self, round_id: str) -> int:
        return int(self._execute(self._sql(self._count_sql("?")), (self._seq(round_id),) * len(self._tables()))[0][0])



def packed_reports(round_id: str, message_ids: list[str], batch: ReportBatch) -> Packed:
    """A group of tree reports as the store keeps them. Packing is numpy and
    Python work, so the server does it on the request's thread: the one thread
    that commits then spends its time in SQLite, which releases the GIL (at
    10^6 binary reports over 16 connections, packing was 11% of that thread's
    time, py-spy)."""
    return round_id, report_rows.message_keys(message_ids), report_rows.pack_tree(batch)


@contextlib.contextmanager
def storage_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """The database's own failures become ``StorageUnavailable`` (503 at the
    edge); the transaction they interrupted was rolled back, so nothing is
    half-written."""
    try:
        yield
    except kinds as exc:
        raise StorageUnavailable(f"storage unavailable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
