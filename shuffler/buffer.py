"""The shuffler's durable buffer (SQLite, WAL, synchronous=FULL).

Holds sealed messages until a batch is released, and the keyed hashes of
the device tokens it issued (``enrol``: devices cannot make up tokens, so a
batch counts enrolled contributors, not self-asserted names). Nothing at
rest links a sender to a message (issue 12, Build 5):
- every table is ``WITHOUT ROWID`` and keyed by random or keyed-hash
  values, so neither row ids nor storage order follow arrival order;
- a device token is kept only as HMAC-SHA256 under a random key of that
  round (``round_keys``): not linkable across rounds, and gone with the
  round (``forget_round``);
- a pending message is keyed by a random slot; re-submitted sealed bytes
  collapse to one (unique per round by their sha256).

Batches are atomic (Build 4): ``form_batch`` moves every pending message of
a round, once there are at least ``threshold``, into ``formed`` in one
transaction, in a ``secrets`` permutation; until ``finish_batch`` a retry
re-sends exactly that set in exactly that order, never merged with later
arrivals, which wait in ``pending`` for the next batch.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
import time

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS round_keys (round_id TEXT PRIMARY KEY, key BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS members (round_id TEXT NOT NULL, member TEXT NOT NULL, "
    "PRIMARY KEY (round_id, member)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS pending (round_id TEXT NOT NULL, slot TEXT NOT NULL, digest TEXT NOT NULL, "
    "sealed BLOB NOT NULL, PRIMARY KEY (round_id, slot)) WITHOUT ROWID",
    "CREATE UNIQUE INDEX IF NOT EXISTS pending_digest ON pending (round_id, digest)",
    "CREATE TABLE IF NOT EXISTS formed (round_id TEXT NOT NULL, seq INTEGER NOT NULL, sealed BLOB NOT NULL, "
    "PRIMARY KEY (round_id, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS digests (round_id TEXT NOT NULL, digest TEXT NOT NULL, "
    "PRIMARY KEY (round_id, digest)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS enrolled (member TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS shuffler_keys (name TEXT PRIMARY KEY, key BLOB NOT NULL) WITHOUT ROWID",
    # When the shuffler first took a message for a round (a round-level time,
    # nothing per message): abandoned rounds expire (``Forwarder.expire``).
    "CREATE TABLE IF NOT EXISTS round_times (round_id TEXT PRIMARY KEY, first REAL NOT NULL) WITHOUT ROWID",
]


class Buffer:
    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA secure_delete=ON")  # freed pages are zeroed, not left with old rows
        for sql in _SCHEMA:
            self._conn.execute(sql)
        self._conn.execute("INSERT OR IGNORE INTO shuffler_keys VALUES ('enrol', ?)", (secrets.token_bytes(32),))
        self._enrol_key = bytes(self._conn.execute("SELECT key FROM shuffler_keys WHERE name = 'enrol'").fetchone()[0])

    def _enrolled_member(self, token: str) -> str:
        return hmac.new(self._enrol_key, token.encode(), hashlib.sha256).hexdigest()

    def enrol(self, count: int) -> list[str]:
        """Issue ``count`` new device tokens (256-bit, random); only their keyed hashes are kept."""
        tokens = [secrets.token_hex(32) for _ in range(count)]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("INSERT INTO enrolled VALUES (?)", [(self._enrolled_member(t),) for t in tokens])
            self._conn.execute("COMMIT")
        return tokens

    def is_enrolled(self, token: str) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM enrolled WHERE member = ?", (self._enrolled_member(token),))
            return row.fetchone() is not None

    def _member(self, round_id: str, token: str) -> str:
        """HMAC of a device token under the round's own random key (created on first use)."""
        row = self._conn.execute("SELECT key FROM round_keys WHERE round_id = ?", (round_id,)).fetchone()
        if row is None:
            key = secrets.token_bytes(32)
            self._conn.execute("INSERT INTO round_keys VALUES (?, ?)", (round_id, key))
            self._conn.execute("INSERT OR IGNORE INTO round_times VALUES (?, ?)", (round_id, time.time()))
        else:
            key = bytes(row[0])
        return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()

    def add_many(self, items: list[tuple[str, str, list[bytes]]]) -> list[bool | BaseException]:
        """Several devices' submissions in one transaction (one fsync); per item,
        True if buffered, False if that device (or those exact sealed bytes)
        already came for the round. A submission of several parts (secure-sum
        shares) is buffered as that many messages, all or none."""
        out: list[bool | BaseException] = []
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for round_id, token, parts in items:
                    digests = [hashlib.sha256(p).hexdigest() for p in parts]
                    seen = self._conn.execute(
                        f"SELECT COUNT(*) FROM digests WHERE round_id = ? AND digest IN ({','.join('?' * len(digests))})",
                        (round_id, *digests)).fetchone()[0]
                    if seen or len(set(digests)) != len(digests):
                        out.append(False)
                        continue
                    cur = self._conn.execute("INSERT OR IGNORE INTO members VALUES (?, ?)",
                                             (round_id, self._member(round_id, token)))
                    if cur.rowcount == 1:
                        self._conn.executemany("INSERT INTO pending VALUES (?, ?, ?, ?)",
                                               [(round_id, secrets.token_hex(16), dg, p) for dg, p in zip(digests, parts, strict=True)])
                        self._conn.executemany("INSERT INTO digests VALUES (?, ?)", [(round_id, dg) for dg in digests])
                    out.append(cur.rowcount == 1)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return out

    def rounds(self) -> dict[str, float]:
        """Every round the buffer knows, with when it first took a message for it."""
        with self._lock:
            keys = [r[0] for r in self._conn.execute("SELECT round_id FROM round_keys")]
            times = dict(self._conn.execute("SELECT round_id, first FROM round_times").fetchall())
        now = time.time()
        return {rid: float(times.get(rid, now)) for rid in keys}

    def count(self, round_id: str) -> int:
        """Messages waiting for a batch (not counting a formed batch being forwarded)."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM pending WHERE round_id = ?", (round_id,)).fetchone()[0])

    def rounds_ready(self, min_batch: int) -> list[str]:
        """Rounds with a formed batch to (re-)send or at least ``min_batch`` pending."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT round_id FROM pending GROUP BY round_id HAVING COUNT(*) >= ? "
                "UNION SELECT DISTINCT round_id FROM formed", (min_batch,)
            ).fetchall()
        return [r[0] for r in rows]

    def has_formed(self, round_id: str) -> bool:
        """A formed batch of the round waits to be (re-)sent."""
        with self._lock:
            return self._conn.execute("SELECT 1 FROM formed WHERE round_id = ? LIMIT 1", (round_id,)).fetchone() is not None

    def form_batch(self, round_id: str, threshold: int) -> list[bytes] | None:
        """The round's batch to send: the formed one if a send is unfinished, else
        a new one of every pending message if there are >= ``threshold``, else None."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                formed = self._conn.execute("SELECT sealed FROM formed WHERE round_id = ? ORDER BY seq",
                                            (round_id,)).fetchall()
                if formed:
                    self._conn.execute("COMMIT")
                    return [bytes(r[0]) for r in formed]
                rows = self._conn.execute("SELECT slot, sealed FROM pending WHERE round_id = ?", (round_id,)).fetchall()
                if len(rows) < threshold:
                    self._conn.execute("COMMIT")
                    return None
                secrets.SystemRandom().shuffle(rows)
                self._conn.executemany("INSERT INTO formed VALUES (?, ?, ?)",
                                       [(round_id, i, r[1]) for i, r in enumerate(rows)])
                self._conn.executemany("DELETE FROM pending WHERE round_id = ? AND slot = ?",
                                       [(round_id, r[0]) for r in rows])
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return [bytes(r[1]) for r in rows]

    def finish_batch(self, round_id: str) -> None:
        """The server acknowledged the formed batch: drop it."""
        with self._lock:
            self._conn.execute("DELETE FROM formed WHERE round_id = ?", (round_id,))

    def forget_round(self, round_id: str) -> None:
        """Everything about a round: its key (so its member hashes mean nothing), members, messages."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            for table in ("round_keys", "members", "pending", "formed", "digests", "round_times"):
                self._conn.execute(f"DELETE FROM {table} WHERE round_id = ?", (round_id,))
            self._conn.execute("COMMIT")
