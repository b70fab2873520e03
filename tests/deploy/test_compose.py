"""docker-compose.yml, checked by parsing and run: every service's exact
command, as a process on 127.0.0.1, in the order its ``depends_on`` gates
give (there is no Docker engine on CI). Only what a container network would
change is rewritten: host names and ports to loopback ports, volume paths
to temporary folders, ``shoal`` to this interpreter's CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests_helpers import free_port, pg_schema

from shoal.common.cli import parse
from shoal.deploy.sim import stop_processes

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def test_compose_services_run_real_shoal_commands():
    assert {"server", "shuffler", "init", "devices", "postgres"} <= set(SERVICES)
    for name in ("server", "shuffler", "init", "devices"):
        svc = SERVICES[name]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        args = parse(svc["command"])  # exits (fails the test) on an unknown option
        assert args.verb == svc["command"][0]
    assert "ENTRYPOINT [\"shoal\"]" in (ROOT / "deploy" / "Dockerfile").read_text()
    # Published ports bind loopback only.
    assert all(p.startswith("127.0.0.1:") for p in SERVICES["server"].get("ports", []))


def test_compose_start_is_health_gated_and_devices_wait_for_the_round():
    deps = {name: svc.get("depends_on", {}) for name, svc in SERVICES.items()}
    assert deps["shuffler"]["server"]["condition"] == "service_healthy"
    assert deps["init"]["server"]["condition"] == "service_healthy"
    assert deps["devices"]["init"]["condition"] == "service_completed_successfully"
    assert deps["devices"]["shuffler"]["condition"] == "service_healthy"
    assert deps["server"]["postgres"] == {"condition": "service_healthy", "required": False}
    for name in ("server", "shuffler", "postgres"):
        assert SERVICES[name]["healthcheck"]["test"][0] == "CMD"


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}."""
    def one(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise AssertionError(f"compose needs {name}: {arg}")
        return arg or ""
    return re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, value)


class Topology:
    """The compose services as processes: names -> loopback ports, volumes -> folders."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env
        self.ports = {"server": free_port(), "shuffler": free_port(), "dask-scheduler": free_port()}
        self.procs: list[subprocess.Popen[bytes]] = []

    def _local(self, name: str, text: str) -> str:
        for svc, port in self.ports.items():
            for scheme in ("http", "tcp"):
                text = text.replace(
                    f"{scheme}://{svc}:{SERVICES[svc]['command'][SERVICES[svc]['command'].index('--port') + 1]}",
                    f"{scheme}://127.0.0.1:{port}")
        if text == "0.0.0.0":
            return "127.0.0.1"
        for volume in SERVICES[name].get("volumes", []):
            vol, mount = volume.split(":")[:2]
            folder = self.tmp / vol
            folder.mkdir(exist_ok=True)
            text = text.replace(mount + "/", f"{folder}/")
        return text

    def command(self, name: str) -> tuple[list[str], dict[str, str]]:
        svc = SERVICES[name]
        argv = [self._local(name, _interpolate(a, self.env)) for a in svc["command"]]
        if "--port" in argv:
            argv[argv.index("--port") + 1] = str(self.ports[name])
        env = dict(os.environ)
        env.pop("SHOAL_DB_URL", None)
        env.update({k: self._local(name, _interpolate(str(v), self.env)) for k, v in svc.get("environment", {}).items()})
        if svc.get("entrypoint") == ["dask"]:  # the image's dask command, from this interpreter's environment
            return [str(Path(sys.executable).parent / "dask"), *argv], env
        return [sys.executable, "-m", "shoal.common.cli", *argv], env

    def start(self, name: str) -> subprocess.Popen[bytes]:
        argv, env = self.command(name)
        log = (self.tmp / f"{name}-{len(self.procs)}.log").open("wb")
        self.procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp))
        return self.procs[-1]

    def healthy(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """Run the service's own healthcheck command until it passes (compose's service_healthy)."""
        check = SERVICES[name]["healthcheck"]
        argv = [self._local(name, a) for a in check["test"][1:]]
        argv = [sys.executable if a == "python" else a.replace(
            f"127.0.0.1:{SERVICES[name]['command'][SERVICES[name]['command'].index('--port') + 1]}",
            f"127.0.0.1:{self.ports[name]}") for a in argv]
        for _ in range(check["retries"] * 5):
            assert proc.poll() is None, f"{name} exited: {self.log(name)}"
            if subprocess.run(argv, capture_output=True, timeout=10).returncode == 0:
                return
            time.sleep(0.4)
        raise AssertionError(f"{name} never became healthy: {self.log(name)}")

    def log(self, name: str) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.tmp.glob(f"{name}-*.log")))

    def stop(self) -> None:
        stop_processes(self.procs)


def _tokens() -> dict[str, str]:
    return {"SHOAL_OPERATOR_TOKEN": "op-" + "a" * 20, "SHOAL_SHUFFLER_TOKEN": "sh-" + "b" * 20,
            "SHOAL_ENROL_TOKEN": "en-" + "c" * 20}


def _run_topology(tmp: Path, env: dict[str, str], replicas: int) -> tuple[Topology, list[dict[str, Any]]]:
    return _continue_topology(Topology(tmp, env), env, replicas)


def _continue_topology(top: Topology, env: dict[str, str], replicas: int) -> tuple[Topology, list[dict[str, Any]]]:
    """Server, shuffler, init and ``replicas`` device services, in their order."""
    try:
        server = top.start("server")
        top.healthy("server", server)
        shuffler = top.start("shuffler")
        top.healthy("shuffler", shuffler)
        init = top.start("init")
        assert init.wait(timeout=120) == 0, top.log("init")
        devices = [top.start("devices") for _ in range(replicas)]
        for p in devices:
            assert p.wait(timeout=300) == 0, top.log("devices")
        url = f"http://127.0.0.1:{top.ports['server']}"
        rounds = httpx.get(url + "/rounds", headers={"Authorization": f"Bearer {env['SHOAL_OPERATOR_TOKEN']}"},
                           timeout=10).json()
        return top, rounds
    except BaseException:
        top.stop()
        raise


def test_compose_replicas_join_one_round_and_no_device_vanishes(tmp_path: Path):
    env = _tokens()
    top, rounds = _run_topology(tmp_path, env, replicas=2)
    try:
        assert len(rounds) == 1, rounds  # scaled devices = one round, not one round per replica
        rid = rounds[0]["id"]
        users = int(SERVICES["devices"]["command"][SERVICES["devices"]["command"].index("--users") + 1])
        url = f"http://127.0.0.1:{top.ports['server']}"
        op = {"Authorization": f"Bearer {env['SHOAL_OPERATOR_TOKEN']}"}
        pending = httpx.get(f"{url}/rounds/{rid}/pending", headers=op, timeout=10).json()["pending"]
        assert rounds[0]["reports"] + pending == 2 * users  # received or still in the shuffler, never lost
        assert rounds[0]["config"]["n_expected"] == 20000
        # The replicas hold different devices of one population (not one sample sent twice).
        result = httpx.post(f"{url}/rounds/{rid}/cluster", headers=op, timeout=120)
        assert result.status_code == 200, result.text
        assert result.json()["quality"]["answer"] in ("clusters", "private mean")
    finally:
        top.stop()


def test_compose_postgres_profile_puts_the_server_on_postgresql(tmp_path: Path):
    with pg_schema() as db:
        env = dict(_tokens(), SHOAL_DB_URL=db)
        top, rounds = _run_topology(tmp_path, env, replicas=1)
        try:
            import psycopg

            assert len(rounds) == 1
            with psycopg.connect(db) as conn:
                stored = conn.execute("SELECT id FROM rounds").fetchall()
            assert [r[0] for r in stored] == [rounds[0]["id"]]
            assert not list(tmp_path.glob("server-data/*.db"))  # no SQLite file beside it
        finally:
            top.stop()


def test_compose_scale_profile_decodes_the_round_on_its_dask_workers(tmp_path: Path):
    distributed = pytest.importorskip("distributed", reason="the 'scale' extra is not installed")
    env = dict(_tokens(), SHOAL_DASK_SCHEDULER="tcp://dask-scheduler:8786")
    top = Topology(tmp_path, env)
    try:
        scheduler = top.start("dask-scheduler")
        top.healthy("dask-scheduler", scheduler)
        assert SERVICES["dask-worker"]["depends_on"]["dask-scheduler"]["condition"] == "service_healthy"
        top.start("dask-worker")
        address = f"tcp://127.0.0.1:{top.ports['dask-scheduler']}"
        with distributed.Client(address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=60)
        top, rounds = _continue_topology(top, env, replicas=1)
        rid = rounds[0]["id"]
        url = f"http://127.0.0.1:{top.ports['server']}"
        op = {"Authorization": f"Bearer {env['SHOAL_OPERATOR_TOKEN']}"}
        result = httpx.post(f"{url}/rounds/{rid}/cluster", headers=op, timeout=120)
        assert result.status_code == 200, result.text
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
        with distributed.Client(address, timeout=30, set_as_default=False) as client:
            opened = client.run(_stores_opened)
        # The worker (another process, run from the compose command) read the server's volume.
        assert [str(tmp_path / "server-data" / "shoal.db")] in [[u.removeprefix("sqlite:///") for u in v]
                                                                for v in opened.values()]
    finally:
        top.stop()


def _stores_opened() -> list[str]:
    from shoal.server.rounds import reduction

    return sorted(reduction._readers)


@pytest.mark.parametrize("template, expected", [
    ("${A:-x}", "x"), ("${A}", ""), ("${B:-x}", "b"), ("${B:?need}", "b")])
def test_interpolation_follows_compose(template: str, expected: str):
    assert _interpolate(template, {"B": "b"}) == expected
