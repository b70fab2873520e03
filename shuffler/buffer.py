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

import enum
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time

import numpy as np

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
    # Rounds the server answered 404 for (``Forwarder.expire``): not forwarded,
    # but their messages are kept (devices got 202 and were charged) until the
    # round's age limit, in case the round comes back (issue 45).
    "CREATE TABLE IF NOT EXISTS orphaned (round_id TEXT PRIMARY KEY, since REAL NOT NULL) WITHOUT ROWID",
]


class Added(enum.Enum):
    """What ``add_many`` did with one device's submission."""

    BUFFERED = "buffered"  # stored durably by this transaction
    HELD = "held"  # exactly these sealed bytes were already taken for the round (a retry whose answer was lost): kept once
    REFUSED = "refused"  # the device used its submissions, or some (not all) of these parts were already taken


_CHUNK = 10_000  # rows per multi-row INSERT (x 3 parameters: under SQLite's 32,766)


def secure_permutation(items: list[bytes]) -> list[bytes]:
    """``items`` in a uniformly random order from ONE read of the OS's CSPRNG:
    sorted by independent random 128-bit keys (a tie, which would fall back to
    the input order, has probability below n^2 / 2^129: 2^-89 at a million
    messages). ``random.SystemRandom().shuffle`` reads the OS once per item,
    each read a GIL release: beside a busy thread that alone took seconds for
    5,000 messages (``form_batch``)."""
    keys = np.frombuffer(secrets.token_bytes(16 * len(items)), dtype="<u8").reshape(len(items), 2)
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    return [items[int(i)] for i in order]


_PAGE = 200  # sealed messages per read step: under SQLite's 1e9-byte value limit at the largest part (4 MiB)


def _read_blobs(conn: sqlite3.Connection, table: str, key: str, round_id: str) -> list[bytes]:
    """A round's ``sealed`` column of ``table``, in ``key`` order when ``key`` is
    ``seq`` (integers), in pages of ``_PAGE`` messages, each page ONE statement
    step: its blobs concatenated, with their lengths and keys beside them, all
    aggregated in one pass over the same rows (a row-by-row fetch is a GIL
    release per row, ``form_batch``). The order is restored here from the keys:
    an aggregate's input order is not something SQLite promises."""
    pairs: list[tuple[int, bytes]] = []
    after: object = None
    while True:
        cond, params = ("", (round_id, _PAGE)) if after is None else (f" AND {key} > ?", (round_id, after, _PAGE))
        keys, lengths, joined, last = conn.execute(
            f"SELECT group_concat({key}), group_concat(length(sealed)), CAST(group_concat(sealed, x'') AS BLOB), "
            f"max({key}) FROM (SELECT {key}, sealed FROM {table} WHERE round_id = ?{cond} ORDER BY {key} LIMIT ?)",
            params).fetchone()
        if lengths is None:
            break
        data, at = bytes(joined), 0
        ranks = [int(k) for k in str(keys).split(",")] if key == "seq" else [0] * (str(lengths).count(",") + 1)
        for rank, size in zip(ranks, map(int, str(lengths).split(",")), strict=True):
            pairs.append((rank, data[at:at + size]))
            at += size
        if at != len(data):
            raise sqlite3.DatabaseError(f"buffer read of {table}: {len(data)} bytes for lengths summing to {at}")
        after = last
    return [blob for _, blob in sorted(pairs, key=lambda pair: pair[0])]


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
        # Enrolment checks read on a connection of their own (WAL: readers never wait for the
        # writer), so a device's request is not queued behind a group commit or a batch being
        # formed: with one connection, 2,000 secure-sum devices of 17 parts spent 4.2 s of
        # request threads waiting for the lock in a sim (py-spy).
        self._read_lock = threading.Lock()
        self._reader = sqlite3.connect(path, check_same_thread=False, isolation_level=None)

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
        """Whether ``token`` was issued here (committed enrolments only: ``enrol`` commits before it returns)."""
        with self._read_lock:
            row = self._reader.execute("SELECT 1 FROM enrolled WHERE member = ?", (self._enrolled_member(token),))
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

    def add_many(self, items: list[tuple[str, str, list[bytes], int]]) -> list[Added | BaseException]:
        """Several devices' submissions in one transaction (one fsync); per item
        (round, device token, parts, submissions the round allows a device) what
        became of it (``Added``). A resubmission of exactly the sealed bytes the
        round already took is HELD, not refused: a device that retries after a
        lost answer learns its message is stored, and it is stored once (the
        direct report path counts a retried message id as a duplicate the same
        way). A submission of several parts (secure-sum shares) is buffered as
        that many messages, all or none."""
        out: list[Added | BaseException] = []
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for round_id, token, parts, submissions in items:
                    digests = [hashlib.sha256(p).hexdigest() for p in parts]
                    seen = self._conn.execute(
                        f"SELECT COUNT(*) FROM digests WHERE round_id = ? AND digest IN ({','.join('?' * len(digests))})",
                        (round_id, *digests)).fetchone()[0]
                    if len(set(digests)) != len(digests) or 0 < seen < len(digests):
                        out.append(Added.REFUSED)
                        continue
                    if seen:
                        out.append(Added.HELD)
                        continue
                    for slot in range(submissions):  # the device's first free slot; slot 0 is the token itself
                        cur = self._conn.execute("INSERT OR IGNORE INTO members VALUES (?, ?)",
                                                 (round_id, self._member(round_id, token if not slot else f"{token}#{slot}")))
                        if cur.rowcount == 1:
                            break
                    if cur.rowcount == 1:  # one statement step each, not one per part (``form_batch``)
                        self._conn.execute("INSERT INTO pending VALUES " + ",".join(["(?, ?, ?, ?)"] * len(parts)),
                                           [v for dg, p in zip(digests, parts, strict=True)
                                            for v in (round_id, secrets.token_hex(16), dg, p)])
                        self._conn.execute("INSERT INTO digests VALUES " + ",".join(["(?, ?)"] * len(parts)),
                                           [v for dg in digests for v in (round_id, dg)])
                    out.append(Added.BUFFERED if cur.rowcount == 1 else Added.REFUSED)
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

    def pin(self, value: str) -> str:
        """The server identity pinned at first use: ``value`` if none is stored
        yet (then stored, durably), else the one stored before; a server that
        later shows another identity does not replace it (``--pin-first-use``)."""
        with self._lock:
            self._conn.execute("INSERT OR IGNORE INTO shuffler_keys VALUES ('server_pin', ?)", (value.encode(),))
            return bytes(self._conn.execute("SELECT key FROM shuffler_keys WHERE name = 'server_pin'").fetchone()[0]).decode()

    def set_orphaned(self, round_id: str, orphaned: bool) -> None:
        """Mark (or unmark) a round the server does not know: ``rounds_ready``
        skips it, its messages stay until ``forget_round``."""
        with self._lock:
            if orphaned:
                self._conn.execute("INSERT OR IGNORE INTO orphaned VALUES (?, ?)", (round_id, time.time()))
            else:
                self._conn.execute("DELETE FROM orphaned WHERE round_id = ?", (round_id,))

    def orphaned(self) -> dict[str, int]:
        """Orphaned rounds with the messages kept for each (pending and formed)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT o.round_id, (SELECT COUNT(*) FROM pending p INDEXED BY pending_digest WHERE p.round_id = o.round_id)"
                " + (SELECT COUNT(*) FROM formed f WHERE f.round_id = o.round_id) FROM orphaned o").fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def count(self, round_id: str) -> int:
        """Messages waiting for a batch (not counting a formed batch being forwarded)."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM pending INDEXED BY pending_digest WHERE round_id = ?",
                                          (round_id,)).fetchone()[0])

    def rounds_ready(self, min_batch: int) -> list[str]:
        """Rounds with a formed batch to (re-)send or at least ``min_batch`` pending,
        except orphaned ones."""
        with self._lock:
            rows = self._conn.execute(
                # counted on the digest index (small rows), not the table of sealed blobs: this runs
                # on every forwarder pass, holding the lock that device submissions wait for
                "SELECT round_id FROM pending INDEXED BY pending_digest GROUP BY round_id HAVING COUNT(*) >= ? "
                "UNION SELECT DISTINCT round_id FROM formed "
                "EXCEPT SELECT round_id FROM orphaned", (min_batch,)
            ).fetchall()
        return [r[0] for r in rows]

    def has_formed(self, round_id: str) -> bool:
        """A formed batch of the round waits to be (re-)sent."""
        with self._lock:
            return self._conn.execute("SELECT 1 FROM formed WHERE round_id = ? LIMIT 1", (round_id,)).fetchone() is not None

    def form_batch(self, round_id: str, threshold: int) -> list[bytes] | None:
        """The round's batch to send: the formed one if a send is unfinished, else
        a new one of every pending message if there are >= ``threshold``, else None.

        Few statement steps (``_read_blobs``: one per ``_PAGE`` messages; one
        multi-row INSERT per ``_CHUNK`` rows; one DELETE): each step
        releases and re-takes the GIL, and beside one busy Python thread (the
        shuffler's request handling) a re-take waits up to a switch interval.
        Row-by-row, a batch of 5,000 sealed messages took 86.6 s there (0.18 s
        alone), holding the lock, so every device submission waited as long."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                formed = _read_blobs(self._conn, "formed", "seq", round_id)
                if formed:
                    self._conn.execute("COMMIT")
                    return formed
                rows = _read_blobs(self._conn, "pending", "slot", round_id)  # any order: permuted below
                if len(rows) < threshold:
                    self._conn.execute("COMMIT")
                    return None
                rows = secure_permutation(rows)
                for lo in range(0, len(rows), _CHUNK):
                    part = rows[lo:lo + _CHUNK]
                    params: list[object] = []
                    for i, sealed in enumerate(part, start=lo):
                        params += [round_id, i, sealed]
                    self._conn.execute("INSERT INTO formed VALUES " + ",".join(["(?, ?, ?)"] * len(part)), params)
                # Every pending message of the round was read in this transaction (the write lock
                # keeps others out), so all of them are now in ``formed``.
                self._conn.execute("DELETE FROM pending WHERE round_id = ?", (round_id,))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return rows

    def finish_batch(self, round_id: str) -> None:
        """The server acknowledged the formed batch: drop it."""
        with self._lock:
            self._conn.execute("DELETE FROM formed WHERE round_id = ?", (round_id,))

    def forget_round(self, round_id: str) -> None:
        """Everything about a round: its key (so its member hashes mean nothing), members, messages."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            for table in ("round_keys", "members", "pending", "formed", "digests", "round_times", "orphaned"):
                self._conn.execute(f"DELETE FROM {table} WHERE round_id = ?", (round_id,))
            self._conn.execute("COMMIT")
