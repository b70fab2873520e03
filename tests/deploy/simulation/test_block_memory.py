"""``shoal simulate``'s allocator settings (deploy/simulation/block_memory.py)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"), reason="glibc only")
def test_glibc_accepts_both_settings() -> None:
    # In a fresh interpreter: the settings are process-wide.
    out = subprocess.run([sys.executable, "-c", "from shoal.deploy.simulation.block_memory import keep_block_buffers as k; print(k())"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_the_simulate_command_applies_them(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import numpy as np

    from shoal.common.cli import main
    from shoal.deploy.simulation import block_memory

    calls: list[int] = []
    monkeypatch.setattr(block_memory, "keep_block_buffers", lambda: calls.append(1) or True)
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(0).uniform(-1, 1, (2000, 2)))
    assert main(["simulate", "--data", str(data), "--k", "2", "--eps", "4", "--radius", "2", "--json"]) == 0
    assert calls == [1]
