"""A throw-away schema on a PostgreSQL server, for benchmarks and tests that
need the real database: created fresh, dropped afterwards, and None (not an
error) when the server cannot be reached, so the caller decides what that means."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"  # the local server: trust auth, database "test"


@contextmanager
def scratch_schema(url: str = PG_URL, prefix: str = "t_") -> Iterator[str | None]:
    """A URL whose search_path is a new schema (dropped on exit), or None."""
    try:
        import psycopg

        conn = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except Exception:  # noqa: BLE001 - any failure to connect means "no PostgreSQL here"
        yield None
        return
    schema = prefix + secrets.token_hex(4)
    conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}?options=-csearch_path%3D{schema}"
    finally:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.close()
