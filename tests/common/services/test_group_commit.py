"""Group commit: each caller gets its own item's result or refusal; a failed
commit fails every caller (nothing of the group was committed)."""

import asyncio
from concurrent.futures import Future

import pytest

from shoal.common.services.group_commit import GroupCommit, commit_and_settle


def _commit(items):
    if "boom" in items:
        raise OSError("disk full")
    return [ValueError(f"refused {i}") if i == "bad" else len(i) for i in items]


def test_each_item_gets_its_own_result_or_refusal():
    futs = [Future() for _ in range(3)]
    commit_and_settle(_commit, ["ab", "bad", "abcd"], futs)
    assert futs[0].result() == 2 and futs[2].result() == 4
    with pytest.raises(ValueError, match="refused bad"):
        futs[1].result()


def test_a_failed_commit_fails_every_caller():
    futs = [Future() for _ in range(2)]
    commit_and_settle(_commit, ["ab", "boom"], futs)
    for f in futs:
        with pytest.raises(OSError, match="disk full"):
            f.result()


def test_a_commit_returning_the_wrong_number_of_results_fails_every_caller():
    futs = [Future() for _ in range(2)]
    commit_and_settle(lambda items: [1], ["a", "b"], futs)
    for f in futs:
        with pytest.raises(RuntimeError, match="1 results for 2 items"):
            f.result()


def test_asyncio_futures_are_settled_too():
    async def main():
        loop = asyncio.get_running_loop()
        futs = [loop.create_future(), loop.create_future()]
        commit_and_settle(_commit, ["x", "yy"], futs)
        return [await f for f in futs]

    assert asyncio.run(main()) == [1, 2]


def test_the_commit_thread_groups_concurrent_submissions():
    sizes = []

    def commit(items):
        sizes.append(len(items))
        return [i * 2 for i in items]

    gc = GroupCommit(commit, name="test-commit")
    futs = [gc.submit(i) for i in range(50)]
    assert [f.result(timeout=5) for f in futs] == [2 * i for i in range(50)]
    assert sum(sizes) == 50
