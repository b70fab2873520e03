"""Durable storage of rounds, reports and results: SQLite (default) or PostgreSQL.

A report acknowledged with 2xx has been committed (SQLite in WAL mode with
synchronous=FULL; PostgreSQL's default durable commit). Reports are stored
as columns (the ``ReportBatch`` fields, the vector as float64 bytes) keyed
by (round, message id), so a retried message is acknowledged but never
stored twice, and decoding reads them back with one vectorised pass.
Device identities are never stored: a report row has no sender.
"""

from __future__ import annotations

import abc
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from shoal.common.errors import ShoalError
from shoal.common.messages import ReportBatch

ROUND_STATES = ("open", "closed", "decoding", "done", "failed")

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS rounds (
        id TEXT PRIMARY KEY, config TEXT NOT NULL, state TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL, result TEXT, error TEXT)""",
    """CREATE TABLE IF NOT EXISTS reports (
        round_id TEXT NOT NULL, message_id TEXT NOT NULL,
        hist_level INTEGER NOT NULL, hist_seed INTEGER NOT NULL, hist_bucket INTEGER NOT NULL,
        vec_level INTEGER NOT NULL, vec_row INTEGER NOT NULL, vec {blob} NOT NULL,
        PRIMARY KEY (round_id, message_id))""",
]


class StoreError(ShoalError):
    """The store cannot do what was asked (bad URL, bad state name)."""


class UnknownRound(StoreError):
    """No round with that id."""


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
    insert_ignore = "INSERT OR IGNORE INTO"
    on_conflict = ""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @abc.abstractmethod
    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in its own committed transaction; return its rows."""

    @abc.abstractmethod
    def _executemany(self, sql: str, groups: list[list[tuple[Any, ...]]]) -> list[int]:
        """Run the statement for every row of every group in ONE transaction
        (one commit, one fsync); return the rows changed per group."""

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.placeholder)

    def init_schema(self) -> None:
        for stmt in _SCHEMA:
            self._execute(stmt.format(blob=self.blob))

    # -- rounds --
    def create_round(self, round_id: str, config: dict[str, Any]) -> None:
        self._execute(
            self._sql("INSERT INTO rounds (id, config, state, created) VALUES (?, ?, ?, ?)"),
            (round_id, json.dumps(config), "open", time.time()),
        )

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

    def _row(self, r: tuple[Any, ...]) -> RoundRow:
        count = self._execute(self._sql("SELECT COUNT(*) FROM reports WHERE round_id = ?"), (r[0],))
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

    def delete_round(self, round_id: str) -> None:
        self._execute(self._sql("DELETE FROM reports WHERE round_id = ?"), (round_id,))
        self._execute(self._sql("DELETE FROM rounds WHERE id = ?"), (round_id,))

    # -- reports --
    def add_reports(self, round_id: str, message_ids: list[str], batch: ReportBatch) -> int:
        """Store validated reports; returns how many were new (duplicates are ignored)."""
        return self.add_report_groups([(round_id, message_ids, batch)])[0]

    def add_report_groups(self, groups: list[tuple[str, list[str], ReportBatch]]) -> list[int]:
        """Several requests' reports in one transaction (group commit); new rows per group."""
        sql = self._sql(
            f"{self.insert_ignore} reports (round_id, message_id, hist_level, hist_seed, hist_bucket, "
            f"vec_level, vec_row, vec) VALUES (?, ?, ?, ?, ?, ?, ?, ?){self.on_conflict}"
        )
        return self._executemany(sql, [_rows(rid, ids, b) for rid, ids, b in groups])

    def load_reports(self, round_id: str, dim: int) -> ReportBatch:
        rows = self._execute(
            self._sql(
                "SELECT hist_level, hist_seed, hist_bucket, vec_level, vec_row, vec FROM reports "
                "WHERE round_id = ? ORDER BY message_id"
            ),
            (round_id,),
        )
        n = len(rows)
        cols = np.array([r[:5] for r in rows], dtype=np.int64).reshape(n, 5)
        raw = b"".join(bytes(r[5]) for r in rows)
        vec = np.frombuffer(raw, dtype=np.float64).reshape(n, -1) if raw else np.zeros((n, 0))
        if vec.shape[1] not in (0, dim):
            raise StoreError(f"stored vectors have width {vec.shape[1]}, the round has dim {dim}")
        return ReportBatch(round_id, cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], cols[:, 4], vec.copy())

    def count_reports(self, round_id: str) -> int:
        return int(self._execute(self._sql("SELECT COUNT(*) FROM reports WHERE round_id = ?"), (round_id,))[0][0])


def _rows(round_id: str, message_ids: list[str], batch: ReportBatch) -> list[tuple[Any, ...]]:
    vec = np.ascontiguousarray(batch.vec, dtype=np.float64)
    return [
        (
            round_id,
            message_ids[i],
            int(batch.hist_level[i]),
            int(batch.hist_seed[i]),
            int(batch.hist_bucket[i]),
            int(batch.vec_level[i]),
            int(batch.vec_row[i]),
            vec[i].tobytes(),
        )
        for i in range(len(batch))
    ]


class SQLiteStore(Store):
    """The embedded default: one file, WAL journal, fsync on every commit."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA busy_timeout=10000")
        self.init_schema()

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _executemany(self, sql: str, groups: list[list[tuple[Any, ...]]]) -> list[int]:
        with self._lock:
            out = []
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for rows in groups:
                    before = self._conn.total_changes
                    self._conn.executemany(sql, rows)
                    out.append(self._conn.total_changes - before)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            return out


class PostgresStore(Store):
    """The production store, by URL (psycopg 3)."""

    placeholder = "%s"
    blob = "BYTEA"
    insert_ignore = "INSERT INTO"
    on_conflict = " ON CONFLICT DO NOTHING"

    def __init__(self, url: str) -> None:
        super().__init__()
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self.init_schema()

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._conn.cursor() as cur:
            cur.execute(sql.encode(), params)
            return list(cur.fetchall()) if cur.description else []

    def _executemany(self, sql: str, groups: list[list[tuple[Any, ...]]]) -> list[int]:
        out = []
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            for rows in groups:
                cur.executemany(sql.encode(), rows)
                out.append(max(cur.rowcount, 0))
        return out


def open_store(url: str) -> Store:
    """``sqlite:///PATH`` (or a bare path) or ``postgresql://...``."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url)
    if url.startswith("sqlite:///"):
        return SQLiteStore(url[len("sqlite:///") :])
    if "://" in url:
        raise StoreError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql://...")
    return SQLiteStore(url)
