"""Stores: SQLite always; PostgreSQL against the real server on 127.0.0.1:5432."""

import json
import time

import numpy as np
import pytest
from tests_helpers import pg_schema

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_to_dict, derive_config
from shoal.common.wire.fields import new_message_id
from shoal.server.storage.factory import open_store
from shoal.server.storage.postgres import PostgresStore
from shoal.server.storage.sqlite import SQLiteStore
from shoal.server.storage.store import StoreError


def _pg_store():
    with pg_schema() as url:
        store = PostgresStore(url)
        yield store
        store._conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        yield SQLiteStore(str(tmp_path / "s.db"))
    else:
        yield from _pg_store()


def _batch(n=50):
    cfg = derive_config(1000, 4, 2, 2.0, seed=1)
    return cfg, encode_arrays(np.random.default_rng(0).uniform(-0.4, 0.4, (n, 4)), cfg)


def test_reports_round_trip_exactly(store):
    cfg, batch = _batch()
    store.create_round("r1", config_to_dict(cfg))
    ids = [new_message_id() for _ in range(len(batch))]
    assert store.add_reports("r1", ids, batch) == len(batch)
    back = store.load_reports("r1", cfg.dim)
    order = np.argsort(ids)
    assert np.array_equal(back.hist_bucket, batch.hist_bucket[order])
    assert np.array_equal(back.vec, batch.vec[order])


def test_a_decode_reads_a_round_in_chunks_that_add_up_to_every_row(store):
    cfg, batch = _batch(50)
    store.create_round("r1", config_to_dict(cfg))
    ids = [new_message_id() for _ in range(50)]
    store.add_reports("r1", ids, batch)
    chunks = list(store.iter_reports("r1", chunk=16))
    assert [len(c) for c in chunks] == [16, 16, 16, 2]
    whole = store.load_reports("r1", cfg.dim)
    assert np.array_equal(np.concatenate([c.vec_nonce for c in chunks]), whole.vec_nonce)
    assert np.array_equal(np.concatenate([c.hist_bucket for c in chunks]), whole.hist_bucket)


def test_a_round_accumulated_chunk_by_chunk_equals_the_whole_round_at_once(store):
    from shoal.server.decoders.tree.accumulate import LevelAccumulator

    cfg, batch = _batch(300)
    store.create_round("r1", config_to_dict(cfg))
    store.add_reports("r1", [new_message_id() for _ in range(300)], batch)
    whole, chunked = LevelAccumulator(cfg), LevelAccumulator(cfg)
    whole.add(store.load_reports("r1", cfg.dim))
    for part in store.iter_reports("r1", chunk=37):
        chunked.add(part)
    assert chunked.n_devices == whole.n_devices == 300
    assert np.array_equal(chunked.hist, whole.hist) and np.allclose(chunked.vec, whole.vec, rtol=0, atol=1e-9)


def test_a_chunked_read_is_one_snapshot_while_reports_keep_arriving(store):
    """Rows committed after a decode's read began are not in it: the decode sees
    one committed state (a flush's shares all or none), and ingestion is not
    blocked meanwhile (the reader has a connection of its own)."""
    store.create_round("s", {"kind": "sketch"})
    rows = np.arange(40.0).reshape(10, 4)
    store.add_payloads("s", [new_message_id() for _ in range(10)], rows)
    reader = store.iter_payloads("s", 4, np.float64, chunk=3)
    first = next(reader)
    assert store.add_payloads("s", [new_message_id() for _ in range(5)], rows[:5] + 100) == 5  # not blocked
    seen = np.concatenate([first, *reader])
    assert seen.shape == (10, 4) and sorted(seen[:, 0]) == sorted(rows[:, 0])
    assert store.count_reports("s") == 15


def test_a_repeated_message_id_is_stored_once(store):
    cfg, batch = _batch(10)
    store.create_round("r1", config_to_dict(cfg))
    ids = [new_message_id() for _ in range(10)]
    assert store.add_reports("r1", ids, batch) == 10
    assert store.add_reports("r1", ids, batch) == 0
    assert store.count_reports("r1") == 10


def test_round_state_and_deletion(store):
    cfg, batch = _batch(5)
    store.create_round("r1", config_to_dict(cfg))
    assert store.get_round("r1").state == "open"
    store.set_state("r1", "done", result={"centers": [[0.0]]})
    row = store.get_round("r1")
    assert row.state == "done" and row.result == {"centers": [[0.0]]}
    store.delete_round("r1")
    with pytest.raises(StoreError, match="unknown round"):
        store.get_round("r1")


def test_rejects_unknown_state(store):
    with pytest.raises(StoreError, match="state"):
        store.set_state("r1", "running")


def test_sqlite_is_in_wal_mode(tmp_path):
    s = SQLiteStore(str(tmp_path / "w.db"))
    assert s._execute("PRAGMA journal_mode")[0][0] == "wal"


def test_open_store_rejects_unknown_schemes():
    with pytest.raises(StoreError, match="unsupported"):
        open_store("mysql://x")


def test_payload_rows_round_trip_exactly_and_once(store):
    """Local sketches (float64) and secure-sum shares (uint64) as fixed-width rows."""
    store.create_round("s", {"kind": "sketch"})
    rows = np.random.default_rng(0).normal(size=(5, 7))
    ids = [new_message_id() for _ in range(5)]
    assert store.add_payloads("s", ids, rows) == 5
    assert store.add_payloads("s", ids[:2], rows[:2]) == 0
    back = store.load_payloads("s", 7, np.float64)
    assert back.shape == (5, 7) and sorted(map(tuple, back)) == sorted(map(tuple, rows))
    store.create_round("q", {"kind": "refine"})
    shares = np.array([[2**63 + 5, 1, 0]], dtype=np.uint64)
    assert store.add_payloads("q", [new_message_id()], shares) == 1
    assert np.array_equal(store.load_payloads("q", 3, np.uint64), shares)
    with pytest.raises(StoreError, match="width"):
        store.load_payloads("s", 6, np.float64)


def test_a_live_decode_lease_excludes_others_and_an_expired_one_is_taken_over(store):
    cfg, _ = _batch()
    store.create_round("r1", config_to_dict(cfg))
    assert store.take_lease("r1", "a", until=110.0, now=100.0)
    assert not store.take_lease("r1", "b", until=120.0, now=105.0)  # a's lease is live
    assert not store.delete_round("r1", now=105.0)
    assert store.take_lease("r1", "b", until=130.0, now=111.0)  # expired: b takes over
    assert not store.renew_lease("r1", "a", until=200.0)
    assert not store.end_lease("r1", "a", "done", result={"x": 1})  # a lost it: nothing written
    assert store.get_round("r1").state == "decoding" and store.get_round("r1").result is None
    assert store.end_lease("r1", "b", "done", result={"x": 2})
    row = store.get_round("r1")
    assert row.state == "done" and row.result == {"x": 2} and store.leases() == []


def test_a_stranded_lease_is_freed_back_to_closed_only_for_its_holder(store):
    cfg, _ = _batch()
    store.create_round("r1", config_to_dict(cfg))
    assert store.take_lease("r1", "gone", until=1.0, now=0.0)
    assert store.leases() == [("r1", "gone", 1.0)]
    assert not store.free_lease("r1", "someone-else")
    assert store.free_lease("r1", "gone")
    row = store.get_round("r1")
    assert row.state == "closed" and "interrupted" in (row.error or "")


def test_a_store_made_before_issue_13_is_migrated_with_every_report(tmp_path):
    """Old schema: rounds without lease/seq columns, reports as seven columns
    keyed by hex strings. Opening it moves every report into report_rows."""
    import sqlite3

    cfg, batch = _batch(30)
    ids = [new_message_id() for _ in range(len(batch))]
    path = str(tmp_path / "old.db")
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE rounds (id TEXT PRIMARY KEY, config TEXT NOT NULL, state TEXT NOT NULL, "
                "created DOUBLE PRECISION NOT NULL, result TEXT, error TEXT)")
    con.execute("CREATE TABLE reports (round_id TEXT NOT NULL, message_id TEXT NOT NULL, hist_level INTEGER NOT NULL, "
                "hist_seed INTEGER NOT NULL, hist_bucket INTEGER NOT NULL, vec_level INTEGER NOT NULL, "
                "vec_row INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (round_id, message_id))")
    con.execute("INSERT INTO rounds VALUES ('t', ?, 'open', 1.0, NULL, NULL)", (json.dumps(config_to_dict(cfg)),))
    con.execute("INSERT INTO rounds VALUES ('p', '{}', 'open', 2.0, NULL, NULL)")
    for i, mid in enumerate(ids):
        pair = np.array([batch.vec_nonce[i], batch.vec_index[i]], dtype="<u8").tobytes()
        con.execute("INSERT INTO reports VALUES ('t', ?, ?, ?, ?, ?, ?, ?)",
                    (mid, int(batch.hist_level[i]), int(batch.hist_seed[i]), int(batch.hist_bucket[i]),
                     int(batch.vec_level[i]), int(batch.vec_row[i]), pair))
    share = np.array([7, 2**63 + 1], dtype="<u8").tobytes()
    con.execute("INSERT INTO reports VALUES ('p', ?, -1, 0, 0, -1, 0, ?)", (new_message_id(), share))
    con.commit()
    con.close()
    store = SQLiteStore(path)
    back = store.load_reports("t", cfg.dim)
    order = np.argsort(ids)
    for name in ("hist_level", "hist_seed", "hist_bucket", "vec_level", "vec_row", "vec_nonce", "vec_index"):
        assert np.array_equal(getattr(back, name), getattr(batch, name)[order]), name
    assert np.array_equal(store.load_payloads("p", 2, np.uint64), [[7, 2**63 + 1]])
    assert store.message_ids("t") == sorted(ids)
    assert store.take_lease("t", "h", until=2.0, now=1.0)
    store.create_round("new", {"a": 1})
    assert store.count_reports("new") == 0


def test_retention_deletes_the_reports_of_old_done_rounds_and_keeps_results(store):
    cfg, batch = _batch()
    for rid in ("old", "new", "open"):
        store.create_round(rid, config_to_dict(cfg))
        store.add_reports(rid, [new_message_id() for _ in range(len(batch))], batch)
    store.set_state("old", "done", result={"centers": [[0.0]]})
    store.set_state("new", "done", result={"centers": [[1.0]]})
    created_new = store.get_round("new").created
    assert store.purge_reports(before=created_new) == ["old"]
    assert store.count_reports("old") == 0 and store.get_round("old").result == {"centers": [[0.0]]}
    assert store.count_reports("new") == len(batch) and store.count_reports("open") == len(batch)


def test_deleting_a_round_gives_its_pages_back_to_the_file_system(tmp_path):
    import os

    store = SQLiteStore(str(tmp_path / "s.db"))
    cfg, batch = _batch(4000)
    store.create_round("r1", config_to_dict(cfg))
    for _ in range(5):
        store.add_reports("r1", [new_message_id() for _ in range(len(batch))], batch)
    _checkpointed(store)
    full = os.path.getsize(tmp_path / "s.db")
    store.delete_round("r1")
    _checkpointed(store)
    assert os.path.getsize(tmp_path / "s.db") < full / 4


def _checkpointed(store):
    """The whole log copied into the file: a TRUNCATE checkpoint under the
    store's lock, tried again while the store's own checkpointer holds the
    log (the pragma's first column, busy, is 1 then and nothing was copied)."""
    deadline = time.monotonic() + 10
    while store._execute("PRAGMA wal_checkpoint(TRUNCATE)")[0][0] and time.monotonic() < deadline:
        time.sleep(0.05)


def test_rows_read_back_byte_for_byte_in_pages_and_id_ranges(store, tmp_path):
    """Every byte value, NULs and invalid UTF-8 included, survives a chunked
    read (SQLite concatenates a page's rows in one statement step), and id
    ranges split a round exactly."""
    cfg, _ = _batch()
    store.create_round("r1", config_to_dict(cfg))
    rng = np.random.default_rng(4)
    rows = rng.integers(0, 1 << 64, (1000, 3), dtype=np.uint64)
    rows[:50] = 0  # runs of NUL bytes
    rows[50:100] = np.uint64(0xFFFFFFFFFFFFFFFF)
    ids = [new_message_id() for _ in range(1000)]
    assert store.add_payloads("r1", ids, rows) == 1000
    order = np.argsort(np.array([bytes.fromhex(i) for i in ids], dtype=object))
    for chunk in (1, 7, 1000, 5000):
        got = list(store.iter_payloads("r1", 3, np.uint64, chunk=chunk))
        assert all(len(g) <= chunk for g in got)
        np.testing.assert_array_equal(np.concatenate(got), rows[order])
    cut = bytes.fromhex(ids[0])[:3]
    below = sum(len(g) for g in store.iter_payloads("r1", 3, np.uint64, ids=(None, cut)))
    above = sum(len(g) for g in store.iter_payloads("r1", 3, np.uint64, ids=(cut, None)))
    assert below + above == 1000 and below == sum(bytes.fromhex(i) < cut for i in ids)


def test_event_rows_are_stamped_with_the_open_step_and_steps_close_up_to_the_horizon(store):
    store.create_round("c1", {"kind": "continual"})
    rows = np.arange(12, dtype=np.uint64).reshape(2, 6) + 100  # word 0 is overwritten by the stamp
    assert store.add_events("c1", [new_message_id() for _ in range(2)], rows) == 2
    assert store.close_step("c1", 2) == 1
    assert store.add_events("c1", [new_message_id()], rows[:1]) == 1
    assert store.close_step("c1", 2) == 2
    assert store.close_step("c1", 2) is None  # the horizon
    back = store.load_payloads("c1", 6, np.uint64)
    assert sorted(back[:, 0].tolist()) == [1, 1, 2] and sorted(back[:, 1].tolist()) == [101, 101, 107]
    assert store.steps_closed("c1") == 2
    # A step's own rows, through the step index (message-id order, as every replay reads them).
    assert sorted(store.load_steps("c1", 6, 1, 1)[:, 1].tolist()) == [101, 107]
    assert store.load_steps("c1", 6, 2, 2)[:, :2].tolist() == [[2, 101]]
    assert store.load_steps("c1", 6, 1, 2).shape == (3, 6) and store.load_steps("c1", 6, 3, 3).shape == (0, 6)
    store.add_step_release("c1", 1, {"step": 1})
    store.add_step_release("c1", 1, {"step": "again"})  # a second writer of a step is ignored
    store.add_step_release("c1", 2, {"step": 2})
    assert store.step_releases("c1") == [{"step": 1}, {"step": 2}] and store.step_releases("c1", 1) == [{"step": 2}]
    store.set_state("c1", "closed")
    assert store.add_events("c1", [new_message_id()], rows[:1]) == -1 and store.close_step("c1", 9) is None
    store.delete_round("c1")
    store.create_round("c2", {"kind": "continual"})
    assert store.step_releases("c2") == []


def _older_store_events(store) -> None:
    store.create_round("c", {"kind": "continual"})
    store.create_round("t", {"kind": "sketch"})
    rows = np.arange(12, dtype=np.uint64).reshape(2, 6)
    store.add_events("c", [new_message_id() for _ in range(2)], rows)
    store.close_step("c", 9)
    store.add_events("c", [new_message_id()], rows[:1])
    store.add_payloads("t", [new_message_id()], rows[:1])


def _gained_the_step_index(again) -> None:
    assert again.load_steps("c", 6, 1, 1).shape[0] == 2 and again.load_steps("c", 6, 2, 2).shape[0] == 1
    assert again._execute("SELECT COUNT(*) FROM report_rows WHERE step IS NULL")[0][0] == 1  # the sketch row


def test_a_store_made_before_the_step_index_gains_it_with_every_event_stamped(tmp_path):
    import sqlite3

    path = str(tmp_path / "old.db")
    store = SQLiteStore(path)
    _older_store_events(store)
    store._conn.close()
    old = sqlite3.connect(path)  # what a store of the earlier schema holds: no step column, no index
    old.executescript("DROP INDEX report_rows_step; ALTER TABLE report_rows DROP COLUMN step;")
    old.close()
    _gained_the_step_index(SQLiteStore(path))


def test_a_postgresql_store_made_before_the_step_index_gains_it_too():
    with pg_schema() as url:
        store = PostgresStore(url)
        _older_store_events(store)
        store._execute("ALTER TABLE report_rows DROP COLUMN step")  # its index goes with it
        store._conn.close()
        again = PostgresStore(url)
        _gained_the_step_index(again)
        again._conn.close()


def test_a_closed_step_never_gains_an_event_while_another_replica_writes(tmp_path):
    """Two connections to the real PostgreSQL: one commits events as fast as it can,
    the other closes steps; every step's rows, counted right after its close,
    are all it ever has (the close waits for the stamping transactions)."""
    import threading

    with pg_schema() as url:
        writer, closer = PostgresStore(url), PostgresStore(url)
        writer.create_round("c", {"kind": "continual"})
        stop = threading.Event()

        def write() -> None:
            while not stop.is_set():
                writer.add_events("c", [new_message_id() for _ in range(5)], np.zeros((5, 4), dtype=np.uint64))

        t = threading.Thread(target=write)
        t.start()
        seen = {}
        try:
            for _ in range(15):
                step = closer.close_step("c", 100)
                stamps = closer.load_payloads("c", 4, np.uint64)[:, 0]
                seen[step] = int((stamps == step).sum())
        finally:
            stop.set()
            t.join()
        stamps = closer.load_payloads("c", 4, np.uint64)[:, 0]
        assert {s: int((stamps == s).sum()) for s in seen} == seen
        assert {s: closer.load_steps("c", 4, s, s).shape[0] for s in seen} == seen  # the step index agrees
        assert sum(seen.values()) > 0
        writer._conn.close()
        closer._conn.close()


def test_the_wal_restarts_under_back_to_back_commits_and_is_emptied_once_idle(tmp_path):
    """Commits with no gap between them (one writer thread, as the group
    commit runs under load) never let a fully copied log restart by itself;
    the checkpointer's locked catch-up does, so the WAL file stays near its
    restart threshold, and an idle store's WAL is emptied."""
    import os
    import threading
    import time

    path = tmp_path / "s.db"
    store = SQLiteStore(str(path), inbox_rows=10**9)  # no merge pass after the load: the WAL is the load's
    store.wal_restart_bytes = 256 << 10
    cfg, batch = _batch(1000)
    store.create_round("r1", config_to_dict(cfg))
    largest, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                largest[0] = max(largest[0], os.path.getsize(str(path) + "-wal"))
            except OSError:
                pass
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    written = 0
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        written += store.add_reports("r1", [new_message_id() for _ in range(len(batch))], batch)
    stop.set()
    sampler.join()
    assert written * 38 > 8 * (256 << 10)  # the log passed its threshold many times over
    # A log that never restarts holds every page written (~95 bytes a row measured,
    # 18 MB after 2 s here); restarted, it held 2 MB of 11.5 MB of rows.
    assert largest[0] < written * 38 / 2
    deadline = time.monotonic() + 5.0
    while store.wal_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.wal_bytes() == 0
    assert store.count_reports("r1") == written


def test_an_idle_truncate_does_not_wait_for_another_process_s_reader(tmp_path):
    """A snapshot held by a reader the store does not know of makes the idle
    TRUNCATE busy at once (it tries again later); a commit meanwhile does
    not wait behind it."""
    import sqlite3
    import time

    path = tmp_path / "s.db"
    store = SQLiteStore(str(path), inbox_rows=10**9)
    cfg, batch = _batch(200)
    store.create_round("r1", config_to_dict(cfg))
    store.add_reports("r1", [new_message_id() for _ in range(len(batch))], batch)
    reader = sqlite3.connect(str(path), isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM report_inbox").fetchone()  # a snapshot in the WAL, held
    try:
        time.sleep(1.6)  # past the idle second: the checkpointer tries its TRUNCATE (busy)
        start = time.monotonic()
        store.add_reports("r1", [new_message_id() for _ in range(len(batch))], batch)
        assert time.monotonic() - start < 1.0
    finally:
        reader.execute("COMMIT")
        reader.close()
    deadline = time.monotonic() + 5.0
    while store.wal_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.wal_bytes() == 0  # emptied once the reader let go
    assert store.count_reports("r1") == 2 * len(batch)
