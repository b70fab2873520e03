"""Issue 42, Build 1: ``shoal simulate`` holds no n x d temporary beyond its input
and one output. A fresh process runs the command at 2e5 x 100 (lsh, eps 4) and
reads its own VmHWM at the end; the peak must stay within 2x the input plus a
fixed allowance: the accumulator's tables (the decode's own data, fixed by the
round's config: 350 MB here, 700 MB at 1e6 where they fit inside 2x) and 64 MB.
Before the issue this run peaked at 1.6 GB; one extra n x d temporary (153 MB)
fails it. About 15 s on a loaded 2-core machine."""

import json
import os
import subprocess
import sys

import numpy as np

from shoal.common.bounds import PublicBound
from shoal.common.kinds.tree import derive_config
from shoal.deploy.simulation.datasets import paper_mixture

CHILD = """
import contextlib, io, json, sys
from shoal.common.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(json.dumps({"rc": rc, "vmhwm_kb": hwm, "out": json.loads(out.getvalue())}))
"""


def test_simulate_peak_rss_is_within_twice_the_input_plus_the_tables(tmp_path):
    n, d, k = 200_000, 100, 8
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(n, d, k=k, seed=0).points)
    args = ["simulate", "--data", str(path), "--k", str(k), "--eps", "4", "--encoder", "lsh", "--radius", "1",
            "--json"]
    run = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SHOAL_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0 and got["out"]["reference"] == "not asked"
    cfg = derive_config(n, d, k, 4.0, encoder="lsh", bound=PublicBound(radius=1.0), seed=0)
    tables = (cfg.levels + 1) * (1 << cfg.vec_columns_log2) * d * 8
    input_bytes = n * d * 8
    peak = got["vmhwm_kb"] * 1024
    allowance = tables + (64 << 20)
    assert peak <= 2 * input_bytes + allowance, (
        f"peak {peak / 2**20:.0f} MB > 2 x input {input_bytes / 2**20:.0f} MB + tables {tables / 2**20:.0f} MB + 64 MB")
