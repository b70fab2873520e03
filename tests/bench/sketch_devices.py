"""Local sketch simulation per device (issue 42, acceptance 2: <= 0.2 ms at d = 10, m = 1000).

1e5 one-record devices through the benchmark's own path (``deploy/bench/sketch._local_sketch``:
``sketch.scramble`` over blocks of devices, the exact discrete Laplace vectorised), the round's
frequencies derived once, as a round does. Usage: ``python tests/bench/sketch_devices.py [--devices 100000]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from shoal.common.mechanisms.sketch import SketchParams, default_scales, frequencies
from shoal.deploy.bench.sketch import _local_sketch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    d, m, k, n = 10, 1000, 10, a.devices
    lo, hi = default_scales(d, k)
    p = SketchParams(dim=d, size=m, measurements=m, epsilon=1.0, seed=1, scale_low=lo, scale_high=hi)
    x = np.random.default_rng(0).uniform(-0.3, 0.3, (n, d))
    for rep in range(a.repeats):
        t = time.perf_counter()
        omega = frequencies(p)
        _local_sketch(x, n, p, omega, np.random.default_rng(rep))
        dt = time.perf_counter() - t
        print(f"{n} one-record devices, d = {d}, m = {m}, eps 1: {dt:.2f} s, {dt / n * 1e3:.3f} ms per device "
              f"(frequencies once per round included); {platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} cores, numpy {np.__version__}", flush=True)


if __name__ == "__main__":
    main()
