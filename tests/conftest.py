"""Shared fixtures: the DP audit helper on sys.path, and a real server process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tests_helpers import free_port, pg_schema, spawn_server, wait_healthy  # noqa: E402


@dataclass
class ServerProc:
    url: str
    operator: str
    shuffler: str
    proc: subprocess.Popen[bytes]
    db: str
    env: dict[str, str]
    port: int

    def op_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.operator}"}

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def start(self) -> None:
        self.proc = spawn_server(self.env, self.port, self.db)
        wait_healthy(self.url, self.proc)


@pytest.fixture
def server(tmp_path: Path):
    port = free_port()
    env = dict(os.environ, SHOAL_OPERATOR_TOKEN="op-" + "x" * 20, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
               SHOAL_ENROL_TOKEN="en-" + "z" * 20,
               SHOAL_KEY_PATH=str(tmp_path / "key.pem"), SHOAL_MAX_BODY_BYTES=str(8 << 20), SHOAL_MAX_BATCH="5000")
    db = f"sqlite:///{tmp_path / 'shoal.db'}"
    proc = spawn_server(env, port, db)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    s = ServerProc(url, env["SHOAL_OPERATOR_TOKEN"], env["SHOAL_SHUFFLER_TOKEN"], proc, db, env, port)
    yield s
    s.proc.kill()
    s.proc.wait()


@pytest.fixture
def pg_server(tmp_path: Path):
    """A server process whose store is the real PostgreSQL (a fresh schema per test)."""
    with pg_schema() as db:
        port = free_port()
        env = dict(os.environ, SHOAL_OPERATOR_TOKEN="op-" + "x" * 20, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
                   SHOAL_KEY_PATH=str(tmp_path / "key.pem"))
        proc = spawn_server(env, port, db)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        yield ServerProc(url, env["SHOAL_OPERATOR_TOKEN"], env["SHOAL_SHUFFLER_TOKEN"], proc, db, env, port)
        proc.kill()
        proc.wait()
