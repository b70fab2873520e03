"""The load generator (``deploy/bench/loadgen.py``) only targets loopback, and
starts without importing the server (issue 42: importing the server's settings
for one host check cost each load generator 1.2 s of CPU at start)."""

import asyncio
import subprocess
import sys

import pytest

from shoal.deploy.bench.loadgen import run_load


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000/x", "http://example.org/x", "http://0.0.0.0:8000/x"])
def test_a_url_off_loopback_is_refused_before_any_request(url):
    with pytest.raises(ValueError, match="only targets loopback"):
        asyncio.run(run_load(url, [b"{}"], 1))


def test_its_cli_says_why_and_exits_2_for_a_url_off_loopback(tmp_path):
    bodies = tmp_path / "b.txt"
    bodies.write_text("{}\n")
    out = subprocess.run([sys.executable, "-m", "shoal.deploy.bench.loadgen", "--url", "http://10.1.2.3:9/r",
                          "--bodies", str(bodies)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "only targets loopback" in out.stderr


def test_it_starts_without_importing_the_server():
    code = "import sys, shoal.deploy.bench.loadgen; print(sorted(m for m in sys.modules if m.startswith('shoal.server')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
