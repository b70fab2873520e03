"""The shuffler's durable buffer (SQLite, WAL, synchronous=FULL).

Holds sealed messages until a batch is released. It keeps a hash of each
device token (to allow one message per device per round), never the
message contents in the clear (they are sealed to the server) and nothing
of the arrival order that is forwarded.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading


class Buffer:
    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS buffer (round_id TEXT NOT NULL, device TEXT NOT NULL, "
            "sealed BLOB NOT NULL, PRIMARY KEY (round_id, device))"
        )
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS seen (round_id TEXT NOT NULL, device TEXT NOT NULL, "
            "PRIMARY KEY (round_id, device))"
        )

    @staticmethod
    def _device(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def add_many(self, items: list[tuple[str, str, list[bytes]]]) -> list[bool | BaseException]:
        """Several devices' submissions in one transaction (one fsync); per item,
        True if buffered, False if that device already sent one for the round.
        A submission of several parts (secure-sum shares) is buffered as that
        many messages, all or none, under keys no one can link to the device."""
        out: list[bool | BaseException] = []
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for round_id, token, parts in items:
                    dev = self._device(token)
                    cur = self._conn.execute("INSERT OR IGNORE INTO seen VALUES (?, ?)", (round_id, dev))
                    if cur.rowcount == 1:
                        self._conn.executemany("INSERT INTO buffer VALUES (?, ?, ?)",
                                               [(round_id, secrets.token_hex(16), p) for p in parts])
                    out.append(cur.rowcount == 1)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return out

    def count(self, round_id: str) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM buffer WHERE round_id = ?", (round_id,)).fetchone()[0])

    def rounds_ready(self, min_batch: int) -> list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT round_id FROM buffer GROUP BY round_id HAVING COUNT(*) >= ?", (min_batch,)
            ).fetchall()
        return [r[0] for r in rows]

    def take(self, round_id: str) -> list[tuple[str, bytes]]:
        """All buffered (key, sealed) pairs of a round; removed only by ``forget``."""
        with self._lock:
            rows = self._conn.execute("SELECT device, sealed FROM buffer WHERE round_id = ?", (round_id,)).fetchall()
        return [(r[0], bytes(r[1])) for r in rows]

    def forget(self, round_id: str, devices: list[str]) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("DELETE FROM buffer WHERE round_id = ? AND device = ?", [(round_id, d) for d in devices])
            self._conn.execute("COMMIT")
