"""``shoal bench --decode-memory``: the server's decode of a stored tree round,
whole-round read (every row at once, the path before issue 19) against the
chunked snapshot read (``Store.iter_rows``), each in a process of its own so
that peak RSS is the decode's alone, on the same SQLite file.

The stored rows are real tree rows except their codebook indices: the
histogram fields come from the devices' encoder, the vector reports' nonces
and indices are drawn uniformly (the codebook search of 10^6 devices would
take an hour; decoding cost and memory do not depend on which candidate a
device picked, so the figures are those of a real round, not its objective).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds import dump_config
from shoal.common.kinds.tree import derive_config
from shoal.common.wire.fields import new_message_id
from shoal.deploy.bench.results import machine
from shoal.deploy.simulation.datasets import paper_mixture

ROUND = "decode-memory"


def build_store(path: Path, n: int, dim: int, k: int, eps: float) -> dict[str, Any]:
    """A SQLite store holding one round of n tree rows; returns its config."""
    from shoal.server.storage.sqlite import SQLiteStore

    cfg = derive_config(n, dim, k, eps, encoder="lsh", seed=0)
    vp = cfg.vec_params
    if vp is None:  # an lsh round in d >= 2 sends vector reports
        raise ValueError(f"an lsh round at d={dim} sends no vector reports: nothing to decode them from")
    store = SQLiteStore(str(path))
    store.create_round(ROUND, dump_config("tree", cfg))
    rng = np.random.default_rng(1)
    for lo in range(0, n, 100_000):
        m = min(100_000, n - lo)
        batch = encode_arrays(paper_mixture(m, d=dim, k=k, seed=0, sample_seed=lo).points, cfg, rng, wire=False)
        has = batch.vec_level >= 0
        batch.vec_nonce = rng.integers(0, 1 << 63, size=m, dtype=np.uint64)
        batch.vec_index = np.where(has, rng.integers(0, vp.candidates, size=m), -1)
        store.add_reports(ROUND, [new_message_id() for _ in range(m)], batch)
    return dump_config("tree", cfg)


def high_water_mb() -> float:
    """This process image's peak RSS (VmHWM: ``simulate.peak_rss_mb``). Not
    ru_maxrss: Linux carries the forking parent's peak into the child, so a
    child of a 1 GB benchmark process would report 1 GB before doing anything."""
    from shoal.deploy.simulation.simulate import peak_rss_mb

    return peak_rss_mb()


def decode_once(path: str, chunked: bool) -> dict[str, Any]:
    """Decode the stored round as the service does (``RoundService.cluster``)."""
    from shoal.common.kinds.tree import config_from_dict
    from shoal.server.decoders.tree.accumulate import LevelAccumulator
    from shoal.server.decoders.tree.decoder import TreeDecoder
    from shoal.server.storage.sqlite import SQLiteStore

    store = SQLiteStore(path)
    cfg = config_from_dict(store.get_round(ROUND).config)
    before = high_water_mb()
    t = time.perf_counter()
    acc = LevelAccumulator(cfg)
    for rows in (store.iter_reports(ROUND) if chunked else [store.load_reports(ROUND, cfg.dim)]):
        acc.add(rows)
    read = time.perf_counter() - t
    TreeDecoder(np.random.default_rng(0)).decode(acc, consume=chunked)
    return {"chunked": chunked, "seconds": time.perf_counter() - t, "read_and_accumulate_seconds": read,
            "peak_rss_mb": high_water_mb(), "rss_before_mb": before,
            "devices": acc.n_devices}


def run(args: argparse.Namespace) -> int:
    n = 20_000 if args.smoke else int(getattr(args, "decode_n", None) or 1_000_000)
    dim, k, eps = 100, 8, 4.0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "round.db"
        t = time.perf_counter()
        build_store(path, n, dim, k, eps)
        build = time.perf_counter() - t
        runs = []
        for chunked in (False, True, False, True):  # interleaved: both see the same page cache
            code = f"import json; from shoal.deploy.bench.decode_memory import decode_once; print(json.dumps(decode_once({str(path)!r}, {chunked})))"
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    whole = [r for r in runs if not r["chunked"]]
    chunk = [r for r in runs if r["chunked"]]
    line = (f"decode-memory: n={n} d={dim} k={k} eps={eps:g} lsh, SQLite, 2 runs each on {machine()} "
            f"(store built in {build:.0f} s): whole-round read {min(r['seconds'] for r in whole):.1f} s, peak RSS "
            f"{max(r['peak_rss_mb'] for r in whole):.0f} MB; chunked snapshot read {min(r['seconds'] for r in chunk):.1f} s, "
            f"peak RSS {max(r['peak_rss_mb'] for r in chunk):.0f} MB (process baseline "
            f"{min(r['rss_before_mb'] for r in runs):.0f} MB); RSS ratio "
            f"{max(r['peak_rss_mb'] for r in chunk) / max(r['peak_rss_mb'] for r in whole):.2f}, time ratio "
            f"{min(r['seconds'] for r in chunk) / min(r['seconds'] for r in whole):.2f}")
    print(line)
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "decode_memory.json").write_text(json.dumps({"line": line, "runs": runs}, indent=1))
    return 0
