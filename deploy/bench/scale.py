"""``shoal bench --scale`` (issue 19, Build 5): tree rounds in the local model
at n = 10^5, 10^6, 10^7 (d = 100) and 10^6, 10^8 (d = 10): encode, store and
decode seconds and the peak RSS of every process, decoded in the server's
process and on a Dask cluster of 1 and 2 worker processes (a real ``dask
scheduler`` and ``dask worker --nworkers W`` started here on 127.0.0.1).

How each phase is run (one process per phase, so each peak RSS is its own):
- encode: the simulator's vectorised encoder (``encode_arrays``, wire=False)
  on the paper generator's points, 10^6 devices (d = 10) or 2 x 10^5
  (d = 100) at a time. Histogram reports are exactly the devices'; the vector
  reports' nonce and codebook index are drawn uniformly, as in
  ``decode_memory.py``: the exact codebook search is one device's work
  (measured 0.18 ms a device at d = 10, 1.0 ms at d = 100), 5 hours of one
  core at 10^8, and decoding cost does not depend on which candidate a
  device picked.
- store: ``Store.add_report_groups`` into a SQLite file, one transaction per
  encoded chunk, with random 16-byte message ids: what HTTP ingestion
  commits, without HTTP (the services benchmark measures that path).
- decode: ``RoundService.cluster`` (lease, count, read + accumulate, decode,
  result written), with ``dask=`` the scheduler or in-process. Worker and
  scheduler peak RSS are read on those processes (VmHWM) after the decode.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from shoal.deploy.bench.results import machine

ROUND_K, ROUND_EPS = 8, 4.0
FULL = ((100_000, 100), (1_000_000, 100), (10_000_000, 100), (1_000_000, 10), (100_000_000, 10))
SMOKE = ((20_000, 10),)


def _service(folder: str) -> Any:
    from shoal.server.rounds.service import RoundService, RoundsSettings

    return RoundService(RoundsSettings(db_url=f"sqlite:///{folder}/round.db", key_path=f"{folder}/key.pem"))


def _peak_mb() -> float:
    from shoal.deploy.simulation.simulate import peak_rss_mb

    return peak_rss_mb()


def build(folder: str, n: int, dim: int) -> dict[str, Any]:
    """One round of n devices encoded and stored (run in a process of its own)."""
    from shoal.client.encoder import encode_arrays
    from shoal.deploy.simulation.datasets import paper_mixture
    from shoal.server.rounds.kinds import RoundRequest

    service = _service(folder)
    rid = service.create(RoundRequest(k=ROUND_K, dim=dim, epsilon=ROUND_EPS, n_expected=n, encoder="lsh")).id
    _, cfg = service.round(rid)
    rng = np.random.default_rng(1)
    step = 1_000_000 if dim <= 10 else 200_000
    gen = enc = sto = 0.0
    for lo in range(0, n, step):
        m = min(step, n - lo)
        t = time.perf_counter()
        points = paper_mixture(m, d=dim, k=ROUND_K, seed=0, sample_seed=lo).points
        gen += time.perf_counter() - t
        t = time.perf_counter()
        batch = encode_arrays(points, cfg, rng, wire=False)
        has = batch.vec_level >= 0
        batch.vec_nonce = rng.integers(0, 1 << 63, size=m, dtype=np.uint64)
        batch.vec_index = np.where(has, rng.integers(0, cfg.vec_params.candidates, size=m), -1)
        enc += time.perf_counter() - t
        t = time.perf_counter()
        ids = np.frombuffer(os.urandom(16 * m), dtype="V16")
        service.store.add_report_groups([(rid, [i.tobytes().hex() for i in ids], batch)])
        sto += time.perf_counter() - t
        del points, batch
    return {"round": rid, "generate_s": gen, "encode_s": enc, "store_s": sto, "peak_rss_mb": _peak_mb(),
            "db_bytes": sum(f.stat().st_size for f in Path(folder).glob("round.db*"))}


def decode(folder: str, rid: str, scheduler: str) -> dict[str, Any]:
    """The round decoded as the server does; ``scheduler`` "" = in-process."""
    service = _service(folder)
    before = _peak_mb()
    t = time.perf_counter()
    result = service.cluster(rid, dask=scheduler)
    seconds = time.perf_counter() - t
    out: dict[str, Any] = {"seconds": seconds, "peak_rss_mb": _peak_mb(), "rss_before_mb": before,
                           "centers": len(result["centers"])}
    if scheduler:
        import distributed

        with distributed.Client(scheduler, set_as_default=False) as client:
            out["worker_peak_rss_mb"] = sorted(client.run(_peak_mb).values())
            out["scheduler_peak_rss_mb"] = client.run_on_scheduler(_peak_mb)
    return out


def _child(call: str) -> dict[str, Any]:
    code = f"import json; from shoal.deploy.bench.scale import build, decode; print(json.dumps({call}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{call} failed:\n{done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


class Cluster:
    """A ``dask scheduler`` and ``dask worker --nworkers W --nthreads 1`` on 127.0.0.1."""

    def __init__(self, workers: int) -> None:
        from shoal.deploy.simulation.processes import free_port

        self.address = f"tcp://127.0.0.1:{free_port()}"
        bin_dir = Path(sys.executable).parent
        dask = str(bin_dir / "dask") if (bin_dir / "dask").exists() else "dask"
        quiet = subprocess.DEVNULL
        self.procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port",
                                        self.address.rsplit(":", 1)[1], "--no-dashboard"], stdout=quiet, stderr=quiet)]
        self.procs.append(subprocess.Popen([dask, "worker", self.address, "--nworkers", str(workers), "--nthreads",
                                            "1", "--memory-limit", "0", "--no-dashboard", "--host", "127.0.0.1"],
                                           stdout=quiet, stderr=quiet))
        import distributed

        with distributed.Client(self.address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=60)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        from shoal.deploy.simulation.processes import stop_processes

        stop_processes(self.procs[::-1], timeout=30)


def run(args: argparse.Namespace) -> int:
    sizes = SMOKE if args.smoke else tuple((int(float(n)), d) for n, d in
                                           (s.split(":") for s in args.scale_sizes.split(","))) \
        if getattr(args, "scale_sizes", None) else FULL
    worker_counts = (1, 2)
    rows: list[dict[str, Any]] = []
    keep = getattr(args, "scale_stores", None)
    for n, dim in sizes:
        with _store_folder(keep, n, dim) as folder:
            saved = Path(folder) / "build.json"
            if saved.exists():  # a store kept by an earlier run (--scale-stores): its build figures are that run's
                built = json.loads(saved.read_text())
            else:
                built = _child(f"build({folder!r}, {n}, {dim})")
                if keep:
                    saved.write_text(json.dumps(built))
            row: dict[str, Any] = {"n": n, "d": dim, **{k: v for k, v in built.items() if k != "round"},
                                   "decodes": []}
            rid = built["round"]
            row["decodes"].append({"workers": 0, **_child(f"decode({folder!r}, {rid!r}, '')")})
            for w in worker_counts:
                with Cluster(w) as cluster:
                    row["decodes"].append({"workers": w, **_child(f"decode({folder!r}, {rid!r}, {cluster.address!r})")})
            rows.append(row)
            print(_line(row), flush=True)
    header = (f"scale: tree rounds, local model, lsh, k={ROUND_K}, eps={ROUND_EPS:g}, paper generator, SQLite; "
              f"on {machine()}")
    print(header)
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scale.json").write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    (out_dir / "scale.md").write_text(_markdown(header, rows))
    return 0


@contextmanager
def _store_folder(keep: str | None, n: int, dim: int) -> Iterator[str]:
    """A temporary folder for one size's store, or ``keep``/n{n}_d{dim}, kept."""
    if keep is None:
        with tempfile.TemporaryDirectory() as folder:
            yield folder
        return
    kept = Path(keep) / f"n{n}_d{dim}"
    kept.mkdir(parents=True, exist_ok=True)
    yield str(kept)


def _line(row: dict[str, Any]) -> str:
    parts = [f"n={row['n']:.0e} d={row['d']}: encode {row['encode_s']:.1f} s, store {row['store_s']:.1f} s "
             f"(build process {row['peak_rss_mb']:.0f} MB, {row['db_bytes'] / 1e9:.2f} GB on disk)"]
    for dec in row["decodes"]:
        where = "in-process" if dec["workers"] == 0 else f"{dec['workers']} worker(s)"
        extra = (f", workers {'/'.join(f'{v:.0f}' for v in dec['worker_peak_rss_mb'])} MB, scheduler "
                 f"{dec['scheduler_peak_rss_mb']:.0f} MB") if dec["workers"] else ""
        parts.append(f"decode {where} {dec['seconds']:.1f} s ({1e6 * dec['seconds'] / row['n']:.2f} us/report), "
                     f"server {dec['peak_rss_mb']:.0f} MB{extra}")
        del where
    return "; ".join(parts)


def _markdown(header: str, rows: list[dict[str, Any]]) -> str:
    lines = [f"# shoal bench --scale\n\n{header}\n",
             "| n | d | encode s | store s | build RSS MB | decode | seconds | us/report | server RSS MB | "
             "worker RSS MB | scheduler RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for dec in row["decodes"]:
            where = "in-process" if dec["workers"] == 0 else f"Dask, {dec['workers']} worker(s)"
            lines.append(
                f"| {row['n']:.0e} | {row['d']} | {row['encode_s']:.1f} | {row['store_s']:.1f} | "
                f"{row['peak_rss_mb']:.0f} | {where} | {dec['seconds']:.1f} | {1e6 * dec['seconds'] / row['n']:.2f} | "
                f"{dec['peak_rss_mb']:.0f} | {'/'.join(f'{v:.0f}' for v in dec.get('worker_peak_rss_mb', [])) or '-'} | "
                f"{dec['scheduler_peak_rss_mb']:.0f} |" if dec["workers"] else
                f"| {row['n']:.0e} | {row['d']} | {row['encode_s']:.1f} | {row['store_s']:.1f} | "
                f"{row['peak_rss_mb']:.0f} | {where} | {dec['seconds']:.1f} | {1e6 * dec['seconds'] / row['n']:.2f} | "
                f"{dec['peak_rss_mb']:.0f} | - | - |")
    return "\n".join(lines) + "\n"
