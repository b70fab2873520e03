"""``shoal bench --device --json``: one row per round kind, in the stated shape
(smoke: a few reports; no timing bound here, performance lives in the benchmark)."""

import json
import subprocess
import sys
from pathlib import Path

KINDS = {"tree lsh local", "tree nettree local", "tree nettree shuffle", "sketch local", "sketch shuffle",
         "partition", "central sealed point", "continual", "refine", "local refine", "elbow"}


def test_bench_device_json_lists_every_kind_with_its_floor():
    out = subprocess.run([str(Path(sys.executable).with_name("shoal")), "bench", "--device", "--json", "--smoke"],
                         capture_output=True, text=True, check=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])
    assert {r["kind"] for r in rows} == KINDS
    for r in rows:
        assert {"kind", "model", "dim", "bytes", "ms", "floor_ms", "ratio"} <= set(r)
        assert r["bytes"] > 0 and r["ms"] > 0 and r["floor_ms"] > 0
    sketch = next(r for r in rows if r["kind"] == "sketch local")
    assert sketch["bytes"] <= 1.2 * (4 * sketch["dim"] + 16)  # m complex float32 values (dim = 2m) and an id
