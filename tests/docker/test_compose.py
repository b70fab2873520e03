"""docker-compose.yml, checked by parsing and run: every service's exact
command, as a process on 127.0.0.1, in the order its ``depends_on`` gates
give (there is no Docker engine on CI). Only what a container network would
change is rewritten: host names and ports to loopback ports, volume paths
to temporary folders, ``shoal`` to this interpreter's CLI. The image's
services run as an unprivileged user with the volumes' owners and modes the
Dockerfile gives; the ``tls`` profile's Caddyfile is checked by Caddy's own
validator and run in front of a real server and shuffler (issue 39)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests_helpers import free_port, pg_schema

from shoal.common.cli import parse
from shoal.deploy.simulation.processes import stop_processes

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def test_compose_services_run_real_shoal_commands():
    assert {"server", "shuffler", "init", "devices", "postgres"} <= set(SERVICES)
    for name in ("server", "shuffler", "init", "devices"):
        svc = SERVICES[name]
        assert svc["build"]["dockerfile"] == "docker/Dockerfile"
        args = parse(svc["command"])  # exits (fails the test) on an unknown option
        assert args.verb == svc["command"][0]
    assert "ENTRYPOINT [\"shoal\"]" in (ROOT / "docker" / "Dockerfile").read_text()
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

    def __init__(self, tmp: Path, env: dict[str, str], run_as: list[str] | None = None,
                 cwd: Path | None = None, process_env: dict[str, str] | None = None) -> None:
        """``run_as``: a command prefix that runs each service as another user
        (``setpriv ...``); ``cwd``: the services' working folder (the image's
        /app); ``process_env``: set in every service's environment (HOME)."""
        self.tmp, self.env, self.process_env = tmp, env, process_env or {}
        self.ports = {"server": free_port(), "shuffler": free_port(), "dask-scheduler": free_port()}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.run_as, self.cwd = run_as or [], cwd or tmp

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
        env = dict(os.environ, **self.process_env)
        env.pop("SHOAL_DB_URL", None)
        env.update({k: self._local(name, _interpolate(str(v), self.env)) for k, v in svc.get("environment", {}).items()})
        if svc.get("entrypoint") == ["dask"]:  # the image's dask command, from this interpreter's environment
            return [str(Path(sys.executable).parent / "dask"), *argv], env
        return [sys.executable, "-m", "shoal.common.cli", *argv], env

    def start(self, name: str) -> subprocess.Popen[bytes]:
        argv, env = self.command(name)
        log = (self.tmp / f"{name}-{len(self.procs)}.log").open("wb")
        self.procs.append(subprocess.Popen([*self.run_as, *argv], env=env, stdout=log, stderr=subprocess.STDOUT,
                                           cwd=self.cwd))
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


DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def _image_user() -> str:
    """The user the image's services run as (its last USER line)."""
    return re.findall(r"^USER (\S+)", DOCKERFILE, re.M)[-1]


def _image_folders() -> dict[str, tuple[str, int]]:
    """The folders the Dockerfile's RUN lines create, chown or chmod: path ->
    (owner, mode), root and 0o755 unless the Dockerfile says otherwise (an
    empty named volume takes these from the image on first mount)."""
    folders: dict[str, tuple[str, int]] = {}
    for line in DOCKERFILE.splitlines():
        if not line.startswith("RUN "):
            continue
        for step in line[4:].split("&&"):
            words = shlex.split(step)
            paths = [w for w in words[1:] if w.startswith("/")]
            for path in paths:
                owner, mode = folders.get(path, ("root", 0o755))
                if words[0] == "chown":
                    owner = words[1].split(":")[0]
                elif words[0] == "chmod":
                    mode = int(words[1], 8)
                folders[path] = (owner, mode)
    return folders


def _written_volumes() -> list[tuple[str, str, str]]:
    """(service, volume, mount) for every volume an image service mounts writable."""
    out = []
    for name, svc in SERVICES.items():
        if svc.get("build", {}).get("dockerfile") != "docker/Dockerfile":
            continue
        for volume in svc.get("volumes", []):
            parts = volume.split(":")
            if parts[-1] != "ro":
                out.append((name, parts[0], parts[1]))
    return out


def test_the_image_runs_as_a_user_who_owns_every_volume_its_services_write():
    user, folders = _image_user(), _image_folders()
    assert user not in ("root", "0")
    assert {mount for _, _, mount in _written_volumes()} == {"/data", "/round"}
    for name, _, mount in _written_volumes():
        assert folders.get(mount, ("root", 0))[0] == user, f"{name} writes {mount}, which the image leaves to root"
        assert folders[mount][1] & 0o700 == 0o700


def _as_unprivileged_user() -> tuple[list[str], int, int]:
    """A command prefix that runs a service as an unprivileged user, and its
    uid and gid. As root (here and in CI): ``nobody``, through util-linux's
    setpriv; as anyone else: that user, already unprivileged."""
    if os.geteuid() != 0:
        return [], os.geteuid(), os.getegid()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux): cannot switch to an unprivileged user")
    import pwd

    try:
        uid, gid = pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid
    except KeyError:
        uid = gid = 65534
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    # The same interpreter as ours, whole: a venv whose base it cannot read may start another Python.
    probe = [sys.executable, "-c", "import sys, shoal.common.cli; print(sys.base_prefix)"]

    def same_python(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*argv, *probe], capture_output=True, text=True, cwd="/", timeout=60)

    if (r := same_python(prefix)).returncode == 0 and r.stdout.strip() == sys.base_prefix:
        return prefix, uid, gid
    # The interpreter may live under root's home (pyenv), which the image's user could read in the
    # image: the one capability that reads any file, none that writes; volumes' modes still decide.
    prefix += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    if (r := same_python(prefix)).returncode != 0 or r.stdout.strip() != sys.base_prefix:
        pytest.skip(f"this interpreter cannot run as uid {uid}: {(r.stdout + r.stderr)[-300:]}")
    return prefix, uid, gid


def _folder_as_in_the_image(folder: Path, owner: str, mode: int, uid: int, gid: int) -> None:
    """``folder`` created with the image's owner and mode: the image's user
    (``uid``) or root; as a non-root tester, root's folders lose their write bits."""
    folder.mkdir(exist_ok=True)
    if owner == _image_user():
        if os.geteuid() == 0:
            os.chown(folder, uid, gid)
        folder.chmod(mode)
    else:
        folder.chmod(mode if os.geteuid() == 0 else mode & 0o555)


def test_compose_round_completes_with_the_services_as_an_unprivileged_user():
    run_as, uid, gid = _as_unprivileged_user()
    # Not tmp_path: pytest's folder is root's alone (0700), which the user could not even enter.
    base = Path(tempfile.mkdtemp(prefix="shoal-compose-user-"))
    base.chmod(0o755)
    try:
        folders = _image_folders()
        for _, volume, mount in _written_volumes():
            _folder_as_in_the_image(base / volume, *folders.get(mount, ("root", 0o755)), uid, gid)
        app = base / "app"  # the image's WORKDIR: root's, so nothing may be written beside the code
        _folder_as_in_the_image(app, "root", 0o755, uid, gid)
        home = base / "home"
        _folder_as_in_the_image(home, _image_user(), 0o755, uid, gid)
        env = _tokens()
        top = Topology(base, env, run_as=run_as, cwd=app, process_env={"HOME": str(home)})
        top, rounds = _continue_topology(top, env, replicas=1)
        try:
            assert len(rounds) == 1, rounds
            url = f"http://127.0.0.1:{top.ports['server']}"
            op = {"Authorization": f"Bearer {env['SHOAL_OPERATOR_TOKEN']}"}
            result = httpx.post(f"{url}/rounds/{rounds[0]['id']}/cluster", headers=op, timeout=120)
            assert result.status_code == 200, result.text
            assert result.json()["quality"]["answer"] in ("clusters", "private mean")
            # Everything was written by the unprivileged user, in the volumes only.
            for written in (base / "server-data" / "shoal.db", base / "server-data" / "server-key.pem",
                            base / "shuffler-data" / "shuffler.db", base / "round" / "id"):
                assert written.stat().st_uid == uid, written
            assert list(app.iterdir()) == []
        finally:
            top.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


CADDY = shutil.which("caddy")


def _caddy_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Caddy's environment: its storage (local CA, certificates) under ``tmp``."""
    return dict(os.environ, XDG_DATA_HOME=str(tmp / "caddy-data"), XDG_CONFIG_HOME=str(tmp / "caddy-config"),
                HOME=str(tmp), **extra)


def test_the_tls_profile_puts_caddy_in_front_of_the_server_and_the_shuffler():
    caddy = SERVICES["caddy"]
    assert caddy["profiles"] == ["tls"]
    assert "./docker/Caddyfile:/etc/caddy/Caddyfile:ro" in caddy["volumes"]
    assert caddy["command"] == ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
    assert caddy["depends_on"] == {"server": {"condition": "service_healthy"},
                                   "shuffler": {"condition": "service_healthy"}}
    for name in ("server", "shuffler"):
        port = SERVICES[name]["command"][SERVICES[name]["command"].index("--port") + 1]
        assert caddy["environment"][f"SHOAL_{name.upper()}_UPSTREAM"] == f"{name}:{port}"
    # Inside compose's network the shuffler reaches the server in plain http, which it must be told is meant.
    assert "--insecure" in SERVICES["shuffler"]["command"]


@pytest.mark.skipif(CADDY is None, reason="caddy is not installed (.ci/run installs Debian's)")
@pytest.mark.parametrize("names", [{}, {"SHOAL_SERVER_ADDRESS": "shoal.example.org",
                                        "SHOAL_SHUFFLER_ADDRESS": "shuffler.example.org"}])
def test_the_caddyfile_passes_caddys_own_validator(tmp_path: Path, names: dict[str, str]):
    assert CADDY is not None
    r = subprocess.run([CADDY, "validate", "--config", str(ROOT / "docker" / "Caddyfile"), "--adapter", "caddyfile"],
                       env=_caddy_env(tmp_path, **names), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Valid configuration" in r.stdout + r.stderr


def _https(root_ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(root_ca))


@pytest.mark.skipif(CADDY is None, reason="caddy is not installed (.ci/run installs Debian's)")
def test_a_device_reports_through_caddy_over_https(tmp_path: Path):
    from shoal.client.device import Device

    assert CADDY is not None
    env = _tokens()
    top = Topology(tmp_path, env)
    try:
        for name in ("server", "shuffler"):
            top.healthy(name, top.start(name))
        # docker/Caddyfile as it is, plus what keeps it on loopback: each site bound to 127.0.0.1 and
        # no HTTP->HTTPS redirect listener (which would take port 80 on every interface).
        text = (ROOT / "docker" / "Caddyfile").read_text().replace("\tadmin off\n",
                                                                      "\tadmin off\n\tauto_https disable_redirects\n")
        text = re.sub(r"^(\{\$SHOAL_\w+_ADDRESS:[^}]*\} \{\n)", "\\1\tbind 127.0.0.1\n", text, flags=re.M)
        assert text.count("bind 127.0.0.1") == 2 and "auto_https disable_redirects" in text
        (tmp_path / "Caddyfile").write_text(text)
        ports = {"server": free_port(), "shuffler": free_port()}
        names = {f"SHOAL_{n.upper()}_ADDRESS": f"localhost:{p}" for n, p in ports.items()}  # Caddy's local CA
        upstreams = {f"SHOAL_{n.upper()}_UPSTREAM": f"127.0.0.1:{top.ports[n]}" for n in ports}
        log = (tmp_path / "caddy-0.log").open("wb")
        top.procs.append(subprocess.Popen([CADDY, "run", "--config", str(tmp_path / "Caddyfile"), "--adapter", "caddyfile"],
                                          env=_caddy_env(tmp_path, **names, **upstreams), stdout=log,
                                          stderr=subprocess.STDOUT, cwd=tmp_path))
        root_ca = tmp_path / "caddy-data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"
        server, shuffler = (f"https://localhost:{ports['server']}", f"https://localhost:{ports['shuffler']}")
        deadline = time.monotonic() + 60
        while True:
            try:
                if root_ca.exists() and httpx.get(server + "/healthz", verify=_https(root_ca), timeout=2).status_code == 200:
                    break
            except (httpx.HTTPError, ssl.SSLError):
                pass
            assert time.monotonic() < deadline and top.procs[-1].poll() is None, top.log("caddy")
            time.sleep(0.2)
        tls = httpx.Client(verify=_https(root_ca), timeout=30)
        op = {"Authorization": f"Bearer {env['SHOAL_OPERATOR_TOKEN']}"}
        rnd = tls.post(server + "/rounds", headers=op, json={"k": 2, "dim": 2, "epsilon": 4.0, "n_expected": 100,
                                                             "encoder": "nettree"}).json()
        out = Device(server, tmp_path / "ledger.json", client=tls).participate(rnd["id"], [0.1, 0.2])
        assert out["accepted"] == 1, out
        assert tls.get(f"{server}/rounds/{rnd['id']}").json()["reports"] == 1
        enrolled = tls.post(shuffler + "/enrol", json={"count": 2},
                            headers={"Authorization": f"Bearer {env['SHOAL_ENROL_TOKEN']}"})
        assert enrolled.status_code == 201 and len(enrolled.json()["tokens"]) == 2  # the shuffler, behind the same proxy
        with pytest.raises(httpx.HTTPError):  # Caddy's ports speak TLS only
            httpx.get(f"http://localhost:{ports['server']}/healthz", timeout=5).raise_for_status()
    finally:
        top.stop()
