"""SQLite's inbox: new report rows wait in a small table and move into
``report_rows`` in key order (``Store.inbox``). What a caller sees must not
change: every row once, duplicates refused across both tables, counts and
reads over both, and a crash at any point loses nothing acknowledged."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_to_dict, derive_config
from shoal.common.wire.fields import new_message_id
from shoal.server.storage.sqlite import SQLiteStore
from shoal.server.storage.store import StoreError


def _batch(n: int, seed: int = 0):
    cfg = derive_config(1000, 4, 2, 2.0, seed=1)
    return cfg, encode_arrays(np.random.default_rng(seed).uniform(-0.4, 0.4, (n, 4)), cfg)


def _tables(path) -> tuple[int, int]:
    """(rows in report_rows, rows in the inbox), read from the file as an auditor would."""
    con = sqlite3.connect(str(path))
    try:
        return (con.execute("SELECT COUNT(*) FROM report_rows").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM report_inbox").fetchone()[0])
    finally:
        con.close()


def _store_with(tmp_path, cap: int):
    store = SQLiteStore(str(tmp_path / "s.db"), inbox_rows=cap, merge_in_background=False)
    cfg, _ = _batch(1)
    store.create_round("r1", config_to_dict(cfg))
    return store


def test_rows_wait_in_the_inbox_until_it_holds_its_cap_then_move_to_report_rows(tmp_path):
    store = _store_with(tmp_path, cap=100)
    _, first = _batch(60, seed=1)
    assert store.add_reports("r1", [new_message_id() for _ in range(60)], first) == 60
    assert _tables(tmp_path / "s.db") == (0, 60)
    _, second = _batch(60, seed=2)
    assert store.add_reports("r1", [new_message_id() for _ in range(60)], second) == 60
    assert _tables(tmp_path / "s.db") == (120, 0)
    _, third = _batch(10, seed=3)
    store.add_reports("r1", [new_message_id() for _ in range(10)], third)
    assert _tables(tmp_path / "s.db") == (120, 10)
    assert store.count_reports("r1") == store.get_round("r1").reports == 130


def test_a_retried_message_is_a_duplicate_whether_it_waits_in_the_inbox_or_was_merged(tmp_path):
    store = _store_with(tmp_path, cap=100)
    _, batch = _batch(80)
    ids = [new_message_id() for _ in range(80)]
    assert store.add_reports("r1", ids, batch) == 80
    assert store.add_reports("r1", ids, batch) == 0  # all in the inbox
    store.settle()
    assert _tables(tmp_path / "s.db") == (80, 0)
    assert store.add_reports("r1", ids, batch) == 0  # all merged
    # half merged, half new, and the new half repeated inside the same group
    _, more = _batch(40, seed=4)
    fresh = [new_message_id() for _ in range(20)]
    mixed = ids[:20] + fresh
    assert store.add_report_groups([("r1", mixed, more), ("r1", mixed, more)]) == [20, 0]
    assert store.count_reports("r1") == 100
    assert len(store.message_ids("r1")) == len(set(store.message_ids("r1"))) == 100


def test_a_group_as_large_as_the_inbox_goes_straight_to_report_rows_after_the_inbox(tmp_path):
    store = _store_with(tmp_path, cap=100)
    _, small = _batch(30, seed=1)
    waiting = [new_message_id() for _ in range(30)]
    store.add_reports("r1", waiting, small)
    assert _tables(tmp_path / "s.db") == (0, 30)
    _, bulk = _batch(120, seed=2)
    bulk_ids = waiting[:10] + [new_message_id() for _ in range(110)]  # ten of them wait in the inbox
    assert store.add_reports("r1", bulk_ids, bulk) == 110
    assert _tables(tmp_path / "s.db") == (140, 0)
    assert store.add_reports("r1", waiting, small) == 0
    assert _tables(tmp_path / "s.db") == (140, 0)


def test_reads_see_every_row_in_message_id_order_wherever_it_waited(tmp_path):
    store = _store_with(tmp_path, cap=70)
    cfg, batch = _batch(100)
    ids = [new_message_id() for _ in range(100)]
    store.add_reports("r1", ids[:60], batch.select(slice(0, 60)))
    store.add_reports("r1", ids[60:80], batch.select(slice(60, 80)))  # merged: 80 in report_rows
    store.add_reports("r1", ids[80:], batch.select(slice(80, 100)))  # waits in the inbox
    assert _tables(tmp_path / "s.db") == (80, 20)
    chunks = list(store.iter_reports("r1", chunk=32))
    assert [len(c) for c in chunks] == [32, 32, 32, 4]
    order = np.argsort(ids)
    assert np.array_equal(np.concatenate([c.vec for c in chunks]), batch.vec[order])
    assert store.message_ids("r1") == sorted(ids)
    assert _tables(tmp_path / "s.db") == (100, 0)  # the read settled the inbox first


def test_a_step_close_reads_its_events_from_both_tables_in_message_id_order_and_writes_nothing(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.db"), inbox_rows=50, merge_in_background=False)
    store.create_round("c", {"kind": "continual"})
    rows = np.arange(60 * 4, dtype=np.uint64).reshape(60, 4)
    ids = [new_message_id() for _ in range(60)]
    store.add_events("c", ids[:40], rows[:40])  # step 1, waits in the inbox
    store.close_step("c", 10)
    store.add_events("c", ids[40:], rows[40:])  # step 2: the inbox reaches 60 and is merged
    store.close_step("c", 10)
    store.add_events("c", [new_message_id() for _ in range(5)], rows[:5])  # step 3, in the inbox
    assert _tables(tmp_path / "s.db") == (60, 5)
    first = store.load_steps("c", 4, 1, 1)
    both = store.load_steps("c", 4, 1, 3)
    assert _tables(tmp_path / "s.db") == (60, 5)  # read, not merged
    assert first.shape == (40, 4) and both.shape == (65, 4)
    assert np.array_equal(np.sort(first[:, 1]), np.sort(rows[:40, 1]))
    assert set(first[:, 0].tolist()) == {1} and sorted(set(both[:, 0].tolist())) == [1, 2, 3]
    assert store.load_steps("c", 4, 3, 3).shape == (5, 4)


def test_deleting_or_purging_a_round_removes_its_rows_from_both_tables(tmp_path):
    store = _store_with(tmp_path, cap=50)
    cfg, batch = _batch(70)
    store.create_round("r2", config_to_dict(cfg))
    store.add_reports("r1", [new_message_id() for _ in range(60)], batch.select(slice(0, 60)))  # merged
    store.add_reports("r1", [new_message_id() for _ in range(10)], batch.select(slice(60, 70)))  # inbox
    store.add_reports("r2", [new_message_id() for _ in range(5)], batch.select(slice(0, 5)))  # inbox
    assert store.delete_round("r1")
    assert _tables(tmp_path / "s.db") == (0, 5)
    store.set_state("r2", "done")
    assert store.purge_reports(before=time.time() + 1) == ["r2"]
    assert _tables(tmp_path / "s.db") == (0, 0)
    assert store.get_round("r2").reports == 0


def test_rows_a_stopped_process_left_in_the_inbox_move_to_report_rows_when_the_store_opens(tmp_path):
    store = _store_with(tmp_path, cap=1000)
    _, batch = _batch(30)
    store.add_reports("r1", [new_message_id() for _ in range(30)], batch)
    assert _tables(tmp_path / "s.db") == (0, 30)
    again = SQLiteStore(str(tmp_path / "s.db"))
    assert _tables(tmp_path / "s.db") == (30, 0)
    assert again.count_reports("r1") == 30


def test_a_read_only_store_never_writes_its_readers_see_what_the_writer_settled(tmp_path):
    store = _store_with(tmp_path, cap=1000)
    _, batch = _batch(30)
    store.add_reports("r1", [new_message_id() for _ in range(30)], batch)
    reader = SQLiteStore(str(tmp_path / "s.db"), read_only=True)
    assert sum(len(c) for c in reader.iter_reports("r1")) == 0  # a Dask worker reads report_rows alone
    assert _tables(tmp_path / "s.db") == (0, 30)
    store.settle()
    assert sum(len(c) for c in reader.iter_reports("r1")) == 30


@pytest.mark.parametrize("cap", [0, -5])
def test_an_inbox_cap_below_one_is_refused(tmp_path, cap):
    with pytest.raises(StoreError, match=f"inbox_rows must be >= 1, got {cap}"):
        SQLiteStore(str(tmp_path / "s.db"), inbox_rows=cap)


def test_the_background_merger_empties_a_full_inbox_after_the_commits_that_filled_it(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.db"), inbox_rows=100)
    cfg, batch = _batch(60)
    store.create_round("r1", config_to_dict(cfg))
    store.add_reports("r1", [new_message_id() for _ in range(60)], batch)
    store.add_reports("r1", [new_message_id() for _ in range(60)], batch)  # 120 >= 100: wakes the merger
    deadline = time.monotonic() + 10
    while _tables(tmp_path / "s.db") != (120, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _tables(tmp_path / "s.db") == (120, 0)
    assert store.count_reports("r1") == 120


def test_a_merge_pass_moves_the_inbox_in_slices_in_key_order_and_commits_go_on_between_them(tmp_path, monkeypatch):
    import threading

    from shoal.server.storage import sqlite_inbox as sqlite_store

    monkeypatch.setattr(sqlite_store, "MERGE_SLICE_ROWS", (25, 25))  # 25 rows a slice
    store = SQLiteStore(str(tmp_path / "s.db"), inbox_rows=10**6, merge_in_background=False)
    cfg, batch = _batch(50)
    store.create_round("r1", config_to_dict(cfg))
    for _ in range(40):
        store.add_reports("r1", [new_message_id() for _ in range(50)], batch)
    assert _tables(tmp_path / "s.db") == (0, 2000)
    slices: list[int] = []
    keys: list[bytes] = []  # the message ids each slice moved, slice after slice
    real = store._merge_slice

    def counted(run, rowids):
        part = run("SELECT message_id FROM report_inbox WHERE rowid IN (SELECT value FROM json_each(?)) "
                   "ORDER BY message_id", (json.dumps(rowids),))
        keys.extend(bytes(r[0]) for r in part)
        out = real(run, rowids)
        slices.append(out)
        time.sleep(0.01)  # a slow slice: commits must get in between slices
        return out

    monkeypatch.setattr(store, "_merge_slice", counted)
    ordered = threading.Event()  # the pass has taken its snapshot of the inbox: "waiting when it started"
    real_order = store._inbox_order

    def order():
        out = real_order()
        ordered.set()
        return out

    monkeypatch.setattr(store, "_inbox_order", order)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (store._merge_pass(), done.set()))
    worker.start()
    assert ordered.wait(10)  # a report added before the snapshot would be one of the rows waiting (CI: 2001)
    during = 0
    while not done.is_set():
        store.add_reports("r1", [new_message_id()], batch.select(slice(0, 1)))
        during += not done.is_set()
    worker.join()
    assert during >= 5  # ingestion went on while the pass ran
    assert sum(slices) == 2000 and set(slices) == {25}  # the rows waiting when the pass started
    assert keys == sorted(keys) and len(set(keys)) == 2000  # consecutive key ranges
    store.settle()
    ids = store.message_ids("r1")
    assert ids == sorted(ids) and len(ids) == len(set(ids)) == store.count_reports("r1") >= 2000 + during
    assert _tables(tmp_path / "s.db")[1] == 0


_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from shoal.client.encoder import encode_arrays
    from shoal.common.wire.messages import new_message_id
    from shoal.common.kinds.tree import config_to_dict, derive_config
    from shoal.server.storage.sqlite import SQLiteStore
    from shoal.server.storage.store import UnknownRound

    store = SQLiteStore(sys.argv[1], inbox_rows=120)
    cfg = derive_config(1000, 4, 2, 2.0, seed=1)
    try:
        store.get_round("r1")
    except UnknownRound:
        store.create_round("r1", config_to_dict(cfg))
    batch = encode_arrays(np.random.default_rng(0).uniform(-0.4, 0.4, (50, 4)), cfg)
    while True:
        ids = [new_message_id() for _ in range(50)]
        store.add_reports("r1", ids, batch)
        print(" ".join(ids), flush=True)  # acknowledged: committed
""")


def test_a_writer_killed_at_any_point_of_its_merges_loses_no_acknowledged_row_and_stores_none_twice(tmp_path):
    """SIGKILL a process that commits groups of 50 rows with a merge every
    third group, at ten different moments; every group it acknowledged is
    there once, in one table or the other."""
    path = tmp_path / "s.db"
    acknowledged: list[str] = []
    for i in range(10):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ))
        lines = []
        deadline = time.monotonic() + 30
        while len(lines) < 4 + 3 * i and time.monotonic() < deadline:  # kill after a varying number of groups
            line = proc.stdout.readline()
            if line:
                lines.append(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        rest, _ = proc.communicate()
        acknowledged += [m for line in lines + rest.splitlines() for m in line.split()]
        assert len(lines) >= 4, "the writer never acknowledged its groups"
    con = sqlite3.connect(str(path))
    stored = [bytes(r[0]).hex() for r in con.execute(
        "SELECT message_id FROM report_rows UNION ALL SELECT message_id FROM report_inbox")]
    con.close()
    assert len(stored) == len(set(stored))
    assert set(acknowledged) <= set(stored)
    assert len(stored) - len(acknowledged) <= 10 * 50  # at most the group in flight at each kill
    store = SQLiteStore(str(path))
    assert store.count_reports("r1") == len(stored)


def test_the_inbox_is_append_only_its_rows_keyed_by_nothing_but_their_rowid(tmp_path):
    _store_with(tmp_path, cap=100)
    con = sqlite3.connect(str(tmp_path / "s.db"))
    sql = con.execute("SELECT sql FROM sqlite_master WHERE name = 'report_inbox'").fetchone()[0].upper()
    indexes = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                         "tbl_name = 'report_inbox' AND sql IS NOT NULL")]
    con.close()
    assert "PRIMARY KEY" not in sql and "WITHOUT ROWID" not in sql
    assert indexes == ["report_inbox_round"]  # on the round alone: its entries append too


def test_a_store_whose_inbox_was_keyed_has_its_waiting_rows_merged_and_the_table_replaced(tmp_path):
    path = tmp_path / "s.db"
    store = _store_with(tmp_path, cap=1000)
    _, batch = _batch(30)
    ids = [new_message_id() for _ in range(30)]
    store.add_reports("r1", ids, batch)
    store.settle()
    con = sqlite3.connect(str(path))  # the layout of earlier versions, rows waiting in it
    con.execute("DROP TABLE report_inbox")
    con.execute("CREATE TABLE report_inbox (round_seq BIGINT NOT NULL, message_id BLOB NOT NULL, report BLOB NOT NULL, "
                "step BIGINT, PRIMARY KEY (round_seq, message_id)) WITHOUT ROWID")
    con.execute("INSERT INTO report_inbox SELECT round_seq, message_id, report, step FROM report_rows")
    con.execute("DELETE FROM report_rows")
    con.commit()
    con.close()
    again = SQLiteStore(str(path), merge_in_background=False)
    assert _tables(path) == (30, 0)
    assert again.message_ids("r1") == sorted(ids)
    assert again.add_reports("r1", ids, batch) == 0


def test_an_id_another_connection_stored_is_refused_the_sets_are_rebuilt(tmp_path):
    path = tmp_path / "s.db"
    store = _store_with(tmp_path, cap=1000)
    _, batch = _batch(20)
    ids = [new_message_id() for _ in range(20)]
    assert store.add_reports("r1", ids[:10], batch.select(slice(0, 10))) == 10  # the round's set is built
    con = sqlite3.connect(str(path))  # another writer of the same file
    con.execute("INSERT INTO report_rows (round_seq, message_id, report) SELECT round_seq, ?, report FROM "
                "report_inbox LIMIT 1", (bytes.fromhex(ids[10]),))
    con.commit()
    con.close()
    assert store.add_reports("r1", ids[10:], batch.select(slice(10, 20))) == 9
    assert store.count_reports("r1") == 20 == len(set(store.message_ids("r1")))


def test_a_round_past_the_id_budget_is_refused_its_retries_by_its_key(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(str(path), inbox_rows=1000, merge_in_background=False, id_budget=50)
    cfg, batch = _batch(80)
    store.create_round("r1", config_to_dict(cfg))
    ids = [new_message_id() for _ in range(80)]
    assert store.add_reports("r1", ids[:40], batch.select(slice(0, 40))) == 40
    assert store.add_reports("r1", ids[40:60], batch.select(slice(40, 60))) == 20  # 60 ids: past the budget
    assert _tables(path) == (0, 60)
    mixed = ids[30:80]
    assert store.add_reports("r1", mixed, batch.select(slice(30, 80))) == 20  # straight into report_rows
    assert _tables(path) == (80, 0)
    assert store.add_reports("r1", ids, batch) == 0
    assert store.count_reports("r1") == 80 == len(set(store.message_ids("r1")))


def test_the_ids_of_a_transaction_that_rolled_back_are_not_counted_as_stored(tmp_path):
    store = _store_with(tmp_path, cap=1000)
    cfg, batch = _batch(10)
    ids = [new_message_id() for _ in range(10)]
    good = ("r1", [bytes.fromhex(m) for m in ids], [b"\0" * 22] * 10)
    bad = ("r1", [bytes.fromhex(new_message_id())], [])  # one id, no row: the transaction fails
    with pytest.raises(StoreError, match="1 message ids for 0 rows"):
        store.add_packed_groups([good, bad])
    assert store.count_reports("r1") == 0
    assert store.add_reports("r1", ids, batch) == 10


def test_an_idle_store_merges_and_a_busy_one_does_not(tmp_path, monkeypatch):
    from shoal.server.storage import sqlite_inbox as sqlite_store

    monkeypatch.setattr(sqlite_store, "MERGE_IDLE_SECONDS", 0.5)
    store = SQLiteStore(str(tmp_path / "s.db"), inbox_rows=100)
    cfg, batch = _batch(60)
    store.create_round("r1", config_to_dict(cfg))
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # commits every 50 ms: never idle for 0.5 s
        store.add_reports("r1", [new_message_id() for _ in range(60)], batch)
        time.sleep(0.05)
    waiting = _tables(tmp_path / "s.db")[1]
    assert waiting >= 60 * 10  # far past inbox_rows, and still in the inbox
    deadline = time.monotonic() + 10
    while _tables(tmp_path / "s.db")[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _tables(tmp_path / "s.db")[1] == 0
    assert store.count_reports("r1") == _tables(tmp_path / "s.db")[0]


@pytest.mark.parametrize("width", [22, 16, 8 * 13])
def test_rows_of_any_one_width_go_in_as_sent_in_one_statement(tmp_path, width):
    """``_insert_rows`` binds a group's keys and rows as two blobs that SQLite
    splits back (every byte value survives, step column included), and counts
    the rows a keyed insert stored."""
    store = SQLiteStore(str(tmp_path / "s.db"), merge_in_background=False)
    rng = np.random.default_rng(width)
    keys = [bytes(rng.integers(0, 256, 16, dtype=np.uint8)) for _ in range(300)]
    rows = [bytes(rng.integers(0, 256, width, dtype=np.uint8)) for _ in range(300)]
    statements: list[str] = []

    def insert(run, table, step, ignore, ks=keys, rs=rows):
        def counted(sql, params):
            statements.append(sql)
            return run(sql, params)
        return store._insert_rows(counted, table, 7, ks, rs, step, ignore)

    assert store._in_transaction(lambda run: insert(run, "report_inbox", 5, False)) == 300
    assert len(statements) == 1
    got = store._execute("SELECT round_seq, message_id, report, step FROM report_inbox ORDER BY rowid")
    assert got == [(7, k, r, 5) for k, r in zip(keys, rows, strict=True)]
    assert store._in_transaction(lambda run: insert(run, "report_rows", None, True, keys[:200], rows[:200])) == 200
    assert store._in_transaction(lambda run: insert(run, "report_rows", None, True)) == 100  # 200 were there
    got = store._execute("SELECT message_id, report, step FROM report_rows ORDER BY message_id")
    assert got == sorted((k, r, None) for k, r in zip(keys, rows, strict=True))


def test_wide_rows_are_split_over_statements_of_a_few_megabytes(tmp_path, monkeypatch):
    from shoal.server.storage import sqlite_inbox

    monkeypatch.setattr(sqlite_inbox, "SPLIT_BYTES", 1000)  # (16 + 104) bytes a row: 8 rows a statement
    store = SQLiteStore(str(tmp_path / "s.db"), merge_in_background=False)
    keys, rows, stored, statements = _twenty_rows_inserted(store, 104, "report_rows", ignore=True)
    assert stored == 20
    assert sum("inbox_positions" in s for s in statements) == 3  # 8 + 8 + 4
    assert store._execute("SELECT message_id, report FROM report_rows ORDER BY message_id") == list(
        zip(keys, rows, strict=True))


def _twenty_rows_inserted(store, width, table, ignore):
    """20 rows of ``width`` bytes through ``_insert_rows`` in one transaction:
    (keys, rows, rows stored, the statements run)."""
    keys = [bytes([i]) * 16 for i in range(1, 21)]
    rows = [bytes([i]) * width for i in range(1, 21)]
    statements: list[str] = []

    def insert(run):
        return store._insert_rows(lambda sql, p: statements.append(sql) or run(sql, p), table, 3, keys, rows,
                                  None, ignore)

    return keys, rows, store._in_transaction(insert), statements


def test_a_statement_inserts_at_most_a_row_per_position(tmp_path, monkeypatch):
    """The positions table bounds a statement's rows: narrow rows that fit the
    byte limit many times over still go in as ceil(rows / POSITIONS) statements."""
    from shoal.server.storage import sqlite_inbox

    monkeypatch.setattr(sqlite_inbox, "POSITIONS", 7)  # before the store fills its positions table
    store = SQLiteStore(str(tmp_path / "s.db"), merge_in_background=False)
    assert store._execute("SELECT count(*), min(i), max(i) FROM temp.inbox_positions") == [(7, 0, 6)]
    keys, rows, stored, statements = _twenty_rows_inserted(store, 22, "report_inbox", ignore=False)
    assert stored == 20
    assert len(statements) == 3  # 7 + 7 + 6
    assert store._execute("SELECT message_id, report FROM report_inbox ORDER BY rowid") == list(
        zip(keys, rows, strict=True))


def test_the_positions_table_stays_out_of_the_store_file(tmp_path):
    """It is the writer connection's temporary table: another connection to
    the file (a reader, an auditor) does not see it."""
    SQLiteStore(str(tmp_path / "s.db"), merge_in_background=False)
    con = sqlite3.connect(tmp_path / "s.db")
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    con.close()
    assert "inbox_positions" not in names


def test_rows_of_unequal_widths_go_in_as_sent_too(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.db"), merge_in_background=False)
    keys = [bytes([i]) * 16 for i in range(1, 6)]
    rows = [bytes([i]) * (8 * i) for i in range(1, 6)]
    assert store._in_transaction(lambda run: store._insert_rows(run, "report_inbox", 3, keys, rows, None, False)) == 5
    assert store._execute("SELECT message_id, report FROM report_inbox ORDER BY rowid") == list(zip(keys, rows, strict=True))
