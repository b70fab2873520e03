"""The store a database URL names: SQLite (a path, or ``sqlite:///PATH``) or
PostgreSQL (``postgresql://...``).

Apart from ``store.py`` (the SQL both back ends share, which ``sqlite.py``
and ``postgres.py`` build on) so that the base module never imports its own
subclasses; each back end is imported when a URL asks for it.
"""

from __future__ import annotations

from shoal.server.storage.id_sets import ID_BUDGET
from shoal.server.storage.store import Store, StoreError


def open_store(url: str, read_only: bool = False, id_budget: int = ID_BUDGET) -> Store:
    """``sqlite:///PATH`` (or a bare path) or ``postgresql://...``.

    ``read_only``: a reader of an existing store (a Dask worker of a
    distributed decode): no schema set-up, no SQLite checkpoint thread.
    ``id_budget``: message ids a SQLite store keeps in memory (``id_sets.py``)."""
    from shoal.server.storage.postgres import PostgresStore
    from shoal.server.storage.sqlite import SQLiteStore

    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url, read_only)
    if url.startswith("sqlite:///"):
        return SQLiteStore(url[len("sqlite:///") :], read_only, id_budget=id_budget)
    if "://" in url:
        raise StoreError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql://...")
    return SQLiteStore(url, read_only, id_budget=id_budget)
