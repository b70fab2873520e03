"""Issue 42: ``shoal simulate`` end to end in this process, then the reference
matmul, printed as one JSON line (run it under ``/usr/bin/time -v`` for the
peak RSS as the OS sees it; VmHWM is printed too).

    python tests/bench/simulate_memory.py DATA.npy --k 8 --eps 4 --encoder lsh --radius 1

Prints how it was run (n, d, k, eps, seed, machine), the command's wall time,
its encode and decode seconds, VmHWM, and one (n x d) @ (d x 32) matmul timed
in the same process after the command, by blocks of 65,536 rows (the same
flops as one product without an n x 32 output or a resident input, so the
matmul does not set the peak), with the ratios the acceptance reads:
encode / matmul and whole / (encode + decode). To time older code, put its
checkout first on PYTHONPATH (a directory holding a ``shoal`` link to it).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import sys
import time

import numpy as np


def vmhwm_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str]) -> int:
    import shoal
    from shoal.common.cli import main as shoal_main

    data, rest = argv[0], argv[1:]
    t = time.perf_counter()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = shoal_main(["simulate", "--data", data, *rest, "--json"])
    whole = time.perf_counter() - t
    peak = vmhwm_mb()
    if rc != 0:
        return rc
    res = json.loads(out.getvalue())
    x = np.load(data, mmap_mode="r")  # the header only: blocks are read with file reads, never resident together
    n, d = x.shape
    w = np.random.default_rng(0).standard_normal((d, 32))
    matmul = 0.0
    with open(data, "rb") as f:
        f.seek(x.offset)
        for lo in range(0, n, 65536):
            block = np.fromfile(f, dtype=np.float64, count=min(65536, n - lo) * d).reshape(-1, d)
            t = time.perf_counter()
            block @ w
            matmul += time.perf_counter() - t
    enc, dec = res["encode_seconds"], res["decode_seconds"]
    print(json.dumps({
        "shoal": os.path.dirname(shoal.__file__), "args": rest, "n": res["n"], "d": res["d"], "k": res["k"],
        "eps": res["eps"], "encoder": res["encoder"], "seed": rest[rest.index("--seed") + 1] if "--seed" in rest else 0,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, numpy {np.__version__}",
        "input_mb": n * d * 8 / 2**20, "vmhwm_mb": peak, "peak_over_input": peak * 2**20 / (n * d * 8),
        "whole_seconds": whole, "encode_seconds": enc, "decode_seconds": dec, "matmul_seconds": matmul,
        "encode_matmul_ratio": enc / matmul, "whole_over_encode_decode": whole / (enc + dec),
        "reference": res.get("reference", "computed (always, before issue 42)"),
        "nonprivate_objective": res["nonprivate_objective"], "normalized_objective": res["normalized_objective"],
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
