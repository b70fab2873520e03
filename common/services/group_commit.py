"""Group commit: many concurrent writers share one transaction and one fsync.

Both the server's report store and the shuffler's buffer promise that a 2xx
means "durably stored", which costs an fsync per commit. Under load, one
writer thread takes every item queued since its last commit and commits them
together; each caller waits for *its* item's commit, so the promise holds
while the fsync cost is shared. ``commit`` returns one entry per item: a
result, or an exception instance for an item refused on its own (the others
still commit). An exception raised by ``commit`` fails every item of that
group (nothing of it was committed).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


class GroupCommit(Generic[T, R]):
    def __init__(self, commit: Callable[[list[T]], list[R | BaseException]], max_items: int = 512,
                 name: str = "group-commit") -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self._commit = commit
        self.max_items = max_items
        self._queue: queue.Queue[tuple[T, Future[R]]] = queue.Queue()
        threading.Thread(target=self._loop, daemon=True, name=name).start()

    def submit(self, item: T) -> Future[R]:
        """Queue ``item``; the future resolves once it is committed (or refused)."""
        fut: Future[R] = Future()
        self._queue.put((item, fut))
        return fut

    def _loop(self) -> None:
        while True:
            group = [self._queue.get()]
            while len(group) < self.max_items:
                try:
                    group.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            commit_and_settle(self._commit, [item for item, _ in group], [fut for _, fut in group])


class Settable(Protocol[R_contra]):
    """A concurrent.futures or asyncio future: what a committed item's caller waits on."""

    def set_result(self, result: R_contra, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


def commit_and_settle(commit: Callable[[list[T]], list[R | BaseException]], items: list[T],
                      futures: Sequence[Settable[R]]) -> None:
    """Commit ``items`` together and settle each future with its own result or
    refusal; if ``commit`` raises, nothing was committed and every future fails."""
    try:
        results = commit(items)
        if len(results) != len(items):
            raise RuntimeError(f"commit returned {len(results)} results for {len(items)} items")
    except BaseException as exc:  # noqa: BLE001 - every waiting caller gets the failure
        for fut in futures:
            fut.set_exception(exc)
        return
    for fut, res in zip(futures, results, strict=True):
        if isinstance(res, BaseException):
            fut.set_exception(res)
        else:
            fut.set_result(res)
