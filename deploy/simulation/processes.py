"""The services as local processes, for ``shoal sim``, the continual sim and
the services benchmarks: a free port, a ``shoal server`` (and optionally a
``shoal shuffler``) started, waited for and stopped, and the devices'
enrolment tokens.

Split from ``sim.py`` so that the continual sim and the benchmarks start
services without importing the sim that dispatches to them.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None = None, log: Path | None = None) -> None:
    """Poll ``url``/healthz until it answers 200 (or the process exits: then
    the error carries the last lines the process wrote to ``log``)."""
    for _ in range(400):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {proc.returncode}{_tail(log)}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not become healthy{_tail(log)}")


def _tail(log: Path | None, lines: int = 15) -> str:
    if log is None or not log.exists():
        return ""
    text = log.read_text(errors="replace").rstrip().splitlines()[-lines:]
    return ("; its last output:\n  " + "\n  ".join(text)) if text else "; it wrote nothing"


def stop_processes(procs: list[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """SIGTERM every process still running, then wait; a process that will
    not stop within ``timeout`` seconds is killed."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


class Services:
    """Server and shuffler processes in a temporary folder, stopped on exit.
    ``db_url``: the servers' store (default: a SQLite file in the folder);
    ``replicas``: that many servers on it, sharing one key (``server_urls``)."""

    def __init__(self, via_shuffler: bool, min_batch: int, db_url: str | None = None, replicas: int = 1,
                 keep: Path | None = None) -> None:
        """``keep``: the folder for the store, key and logs, kept after the
        run (``shoal sim --keep``) instead of a temporary one."""
        self.tmp: tempfile.TemporaryDirectory[str] | None = None
        if keep is None:
            self.tmp = tempfile.TemporaryDirectory(prefix="shoal-sim-")
            self.dir = Path(self.tmp.name)
        else:
            self.dir = keep.resolve()
            self.dir.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, SHOAL_OPERATOR_TOKEN=secrets.token_urlsafe(18),
                        SHOAL_SHUFFLER_TOKEN=secrets.token_urlsafe(18),
                        SHOAL_ENROL_TOKEN=secrets.token_urlsafe(18),
                        SHOAL_KEY_PATH=str(self.dir / "key.pem"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        try:
            port = free_port()
            self.server_url = f"http://127.0.0.1:{port}"
            self.shuffler_url: str | None = None
            if via_shuffler:
                sport = free_port()
                self.shuffler_url = f"http://127.0.0.1:{sport}"
                # The server relays the operator's pending/flush to it (POST /rounds/{id}/flush).
                self.env["SHOAL_SHUFFLER_URL"] = self.shuffler_url
            # Problems only: a request line per report would cost the throughput sim measures.
            self.server_urls = [self.server_url] + [f"http://127.0.0.1:{free_port()}" for _ in range(replicas - 1)]
            for url in self.server_urls:
                self._spawn("server", ["--port", url.rsplit(":", 1)[1], "--db",
                                       db_url or f"sqlite:///{self.dir}/server.db", "--log-level", "warning"])
                wait_healthy(url, self.procs[-1], self.logs[-1])
            if self.shuffler_url is not None:
                # The operator pins the server's identity on the shuffler (out of band: here, from the server it started).
                self.server_key = httpx.get(self.server_url + "/server-key", timeout=10).json()["fingerprint"]
                self._spawn("shuffler", ["--server-url", self.server_url, "--port", str(sport), "--server-key",
                             self.server_key, "--min-batch", str(min_batch), "--db", f"{self.dir}/shuffler.db",
                             "--log-level", "warning"])
                wait_healthy(self.shuffler_url, self.procs[-1], self.logs[-1])
        except BaseException:
            self.close()  # a service that did not come up: stop the others, remove the folder
            raise

    def _spawn(self, verb: str, argv: list[str]) -> None:
        """``shoal VERB ARGV`` in a child process; its output goes to a log file
        in the temporary folder, shown if the child dies (``wait_healthy``)."""
        self.logs.append(self.dir / f"{verb}-{len(self.logs)}.log")
        with self.logs[-1].open("wb") as log:
            self.procs.append(subprocess.Popen([sys.executable, "-m", "shoal.common.cli", verb, *argv],
                                               env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def close(self) -> None:
        stop_processes(self.procs)
        if self.tmp is not None:
            self.tmp.cleanup()


def enrol_tokens(shuffler_url: str, enrol_token: str, n: int) -> list[str]:
    """The operator enrols ``n`` devices at the shuffler (``POST /enrol``): one token each."""
    tokens: list[str] = []
    while len(tokens) < n:
        r = httpx.post(f"{shuffler_url}/enrol", json={"count": min(10_000, n - len(tokens))},
                       headers={"Authorization": f"Bearer {enrol_token}"}, timeout=60)
        r.raise_for_status()
        tokens += r.json()["tokens"]
    return tokens
