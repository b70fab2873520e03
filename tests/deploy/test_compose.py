"""docker-compose.yml is checked by parsing: every command is a real shoal verb with valid options."""

from pathlib import Path

import yaml

from shoal.common.cli import parse

ROOT = Path(__file__).resolve().parents[2]


def test_compose_services_run_real_shoal_commands():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"server", "shuffler", "devices", "postgres"} <= set(services)
    for name in ("server", "shuffler", "devices"):
        svc = services[name]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        args = parse(svc["command"])  # exits (fails the test) on an unknown option
        assert args.verb == svc["command"][0]
    assert "ENTRYPOINT [\"shoal\"]" in (ROOT / "deploy" / "Dockerfile").read_text()
    # Published ports bind loopback only.
    assert all(p.startswith("127.0.0.1:") for p in services["server"].get("ports", []))
