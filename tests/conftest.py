"""Shared fixtures: the DP audit helper on sys.path, and a real server process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tests_helpers import free_port  # noqa: E402


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
        self.proc = _spawn(self.env, self.port, self.db)
        _wait(self.url)


def _spawn(env: dict[str, str], port: int, db: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "shoal.client.cli", "server", "--port", str(port), "--db", db],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def _wait(url: str) -> None:
    for _ in range(200):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


@pytest.fixture
def server(tmp_path: Path):
    port = free_port()
    env = dict(os.environ, SHOAL_OPERATOR_TOKEN="op-" + "x" * 20, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
               SHOAL_KEY_PATH=str(tmp_path / "key.pem"), SHOAL_MAX_BODY_BYTES=str(8 << 20), SHOAL_MAX_BATCH="5000")
    db = f"sqlite:///{tmp_path / 'shoal.db'}"
    proc = _spawn(env, port, db)
    url = f"http://127.0.0.1:{port}"
    _wait(url)
    s = ServerProc(url, env["SHOAL_OPERATOR_TOKEN"], env["SHOAL_SHUFFLER_TOKEN"], proc, db, env, port)
    yield s
    s.proc.kill()
    s.proc.wait()
