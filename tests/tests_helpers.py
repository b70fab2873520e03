"""Helpers shared by test modules (importable: tests/ is on sys.path)."""

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from shoal.server.sim import free_port, wait_healthy

__all__ = ["PG_URL", "free_port", "pg_schema", "wait_healthy"]

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh schema on the real PostgreSQL (dropped afterwards); yields a URL
    whose search_path is that schema. Skips the test, with the reason, when
    the server is not reachable."""
    try:
        import psycopg

        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any connection failure means "not available"
        pytest.skip(f"PostgreSQL not reachable at {PG_URL}: {exc}")
    schema = "t_" + secrets.token_hex(4)
    conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.close()
