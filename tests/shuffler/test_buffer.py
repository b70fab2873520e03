"""The shuffler's durable buffer (shuffler/buffer.py): a formed batch holds every
pending message byte for byte, in a uniformly random order, and a retry before
the server's acknowledgement re-sends exactly that list in exactly that order."""

from __future__ import annotations

import itertools

import numpy as np
from scipy import stats

from shoal.shuffler.buffer import Added, Buffer, secure_permutation


def test_the_permutation_is_uniform():
    items = [b"a", b"b", b"c"]
    perms = list(itertools.permutations(items))
    counts = np.zeros(len(perms))
    for _ in range(30_000):
        counts[perms.index(tuple(secure_permutation(items)))] += 1
    assert stats.chisquare(counts).pvalue > 1e-4


def test_a_formed_batch_keeps_every_message_byte_for_byte_and_a_retry_resends_the_same_order(tmp_path):
    buf = Buffer(str(tmp_path / "buf.db"))
    rng = np.random.default_rng(0)
    # Lengths from 1 to 900 bytes, with commas, NUL and 0xFF bytes: nothing may split or merge them.
    messages = [bytes([44, 0, 255]) + rng.bytes(int(rng.integers(0, 900))) for _ in range(700)]  # 4 pages of 200
    tokens = buf.enrol(len(messages))
    assert set(buf.add_many([("r", t, [m], 1) for t, m in zip(tokens, messages, strict=True)])) == {Added.BUFFERED}
    assert buf.form_batch("r", 701) is None  # below the threshold: nothing moves
    batch = buf.form_batch("r", 700)
    assert batch is not None and sorted(batch) == sorted(messages)
    assert batch != messages  # permuted (a 1 / 700! chance of failing)
    assert buf.count("r") == 0
    assert buf.form_batch("r", 700) == batch  # unacknowledged: the same list, the same order
    buf.finish_batch("r")
    assert buf.form_batch("r", 1) is None


def test_a_devices_share_parts_are_buffered_all_or_none(tmp_path):
    buf = Buffer(str(tmp_path / "buf.db"))
    (token,) = buf.enrol(1)
    parts = [bytes([i]) * (10 + i) for i in range(17)]
    assert buf.add_many([("r", token, parts, 1)]) == [Added.BUFFERED]
    assert buf.add_many([("r", token, parts, 1)]) == [Added.HELD]  # the same bytes again (a retry): kept once
    assert buf.add_many([("r", token, parts[:16] + [b"new"], 1)]) == [Added.REFUSED]  # 16 of its parts were taken
    (other,) = buf.enrol(1)
    assert buf.add_many([("r", other, [b"x", b"x"], 1)]) == [Added.REFUSED]  # one share twice
    assert buf.count("r") == 17
    assert sorted(buf.form_batch("r", 17) or []) == sorted(parts)


def test_a_round_that_allows_two_submissions_takes_a_devices_second_and_refuses_its_third(tmp_path):
    buf = Buffer(str(tmp_path / "buf.db"))
    (token,) = buf.enrol(1)
    assert buf.add_many([("r", token, [b"insert"], 2)]) == [Added.BUFFERED]
    assert buf.add_many([("r", token, [b"withdraw"], 2)]) == [Added.BUFFERED]
    assert buf.add_many([("r", token, [b"third"], 2)]) == [Added.REFUSED]
    assert buf.add_many([("s", token, [b"other round"], 1)]) == [Added.BUFFERED]
    assert buf.count("r") == 2
