"""Python per-report encode times at d = 100 (JSON on stdout, for scripts/bench.ts).

    .venv/bin/python clients/js/scripts/bench_reference.py | node clients/js/build/bench.mjs
"""
import json
import sys
import time

import numpy as np

from shoal.client.encoder import encode, encode_batch
from shoal.common.kinds import config_kinds
from shoal.common.kinds.tree import derive_config

out = {}
for enc in ("lsh", "nettree"):
    c = derive_config(100000, 100, 10, 4.0, encoder=enc, seed=5)
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(200, 100)) * 0.1
    encode(pts[0], c)  # warm: public objects cached
    t = time.perf_counter()
    for p in pts:
        encode(p, c)
    one = (time.perf_counter() - t) / len(pts)
    t = time.perf_counter()
    encode_batch(pts, c)
    batch = (time.perf_counter() - t) / len(pts)
    out[enc] = {"config": json.dumps(config_kinds()["tree"].dump(c)), "one_ms": one * 1e3, "batch_ms": batch * 1e3,
                "N": c.vec_candidates, "root_N": c.root_candidates}
json.dump(out, sys.stdout)

