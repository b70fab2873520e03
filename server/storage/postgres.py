"""The production store: PostgreSQL through psycopg 3, reconnecting when its
connection breaks (the failed transaction was rolled back; the caller gets
StorageUnavailable, a 503 with Retry-After)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from shoal.server.storage.store import IdRange, Run, Store, T, storage_errors


class PostgresStore(Store):
    """The production store, by URL (psycopg 3)."""

    placeholder = "%s"
    blob = "BYTEA"
    without_rowid = ""
    insert_ignore = "INSERT INTO"
    on_conflict = " ON CONFLICT DO NOTHING"
    lock_shared = " FOR SHARE"
    inserted_sql = ""
    concat_reports = ("SELECT string_agg(report, ''::bytea ORDER BY message_id), count(*) FROM report_rows "
                      "WHERE {where}")

    def __init__(self, url: str, read_only: bool = False) -> None:
        super().__init__()
        import psycopg

        self.integrity_errors = (psycopg.IntegrityError,)
        self._url = url
        self._errors = (psycopg.OperationalError, psycopg.InterfaceError)
        self._conn = psycopg.connect(url, autocommit=True)
        if not read_only:
            self.init_schema()

    def _connection(self) -> Any:
        """The connection, reconnected if the last one broke (server restart, network)."""
        if self._conn.broken or self._conn.closed:
            import psycopg

            self._conn = psycopg.connect(self._url, autocommit=True)
        return self._conn

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock, storage_errors(*self._errors), self._connection().cursor() as cur:
            cur.execute(sql.encode(), params)
            return list(cur.fetchall()) if cur.description else []

    def _columns(self, table: str) -> set[str]:
        rows = self._execute("SELECT column_name FROM information_schema.columns "
                             "WHERE table_name = %s AND table_schema = current_schema()", (table,))
        return {str(r[0]) for r in rows}

    def _has_table(self, name: str) -> bool:
        return bool(self._execute("SELECT 1 FROM information_schema.tables WHERE table_name = %s "
                                  "AND table_schema = current_schema()", (name,)))

    def _row_chunks(self, seq: int, chunk: int, ids: IdRange) -> Iterator[tuple[int, bytes]]:
        """A server-side (named) cursor in one REPEATABLE READ transaction on a
        connection of its own: one snapshot, streamed ``chunk`` rows at a time,
        without the store's lock (ingestion goes on meanwhile). psycopg builds
        each fetched batch in C, holding the GIL, so other threads do not slow it."""
        import psycopg

        lo, hi = ids
        sql = ("SELECT report FROM report_rows WHERE round_seq = %s" + (" AND message_id >= %s" if lo is not None else "")
               + (" AND message_id < %s" if hi is not None else "") + " ORDER BY message_id")
        params = (seq, *(b for b in (lo, hi) if b is not None))
        with storage_errors(*self._errors), psycopg.connect(self._url) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            with conn.cursor(name="shoal_decode") as cur:
                cur.execute(sql.encode(), params)
                while rows := cur.fetchmany(chunk):
                    yield len(rows), b"".join(bytes(r[0]) for r in rows)

    def _in_transaction(self, work: Callable[[Run], T]) -> T:
        with self._lock, storage_errors(*self._errors):
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:

                def run(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
                    cur.execute(sql.encode(), params)
                    return list(cur.fetchall()) if cur.description else []

                return work(run)
