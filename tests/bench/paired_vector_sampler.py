"""Paired accuracy runs with common random numbers: only the vector report's
sampler differs (issue 12's 5% criterion, settled on paper nettree eps 4).

For one seed, runs ``simulate`` with the vector report drawn from its own
generator ``default_rng(SeedSequence([seed, 99]))``: either shoal's codebook
PrivUnit (simulation sampler) or shoal 0.1's floating-point PrivUnit
(``tests/legacy_samplers.py``). Every other draw is the same in both arms.
Prints one JSON line. Usage (two at a time on two cores):

    for s in $(seq 0 39); do for w in codebook float; do
      python tests/bench/paired_vector_sampler.py $w $s --data paper --encoder nettree --eps 4
    done; done > paired.jsonl
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from legacy_samplers import LegacyPrivUnit  # noqa: E402

import shoal.client.encoder as encoder_module  # noqa: E402
from shoal.common.mechanisms.privunit import round_to_sphere  # noqa: E402
from shoal.deploy.simulation.datasets import load_uber, paper_mixture  # noqa: E402
from shoal.deploy.simulation.simulate import simulate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("which", choices=["codebook", "float"])
    ap.add_argument("seed", type=int)
    ap.add_argument("--data", choices=["paper", "uber"], default="paper")
    ap.add_argument("--encoder", choices=["lsh", "nettree"], default="nettree")
    ap.add_argument("--eps", type=float, default=4.0)
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    args = ap.parse_args()
    vrng = np.random.default_rng(np.random.SeedSequence([args.seed, 99]))
    codebook = encoder_module.sample_decoded
    legacy: dict[tuple[int, float], LegacyPrivUnit] = {}

    def float_sampler(x, vp, rng):  # noqa: ANN001 -- the encoder's signature
        mech = legacy.setdefault((vp.dim, vp.epsilon), LegacyPrivUnit.calibrate(vp.dim, vp.epsilon))
        return mech.privatise(round_to_sphere(x, vrng), vrng)

    def codebook_sampler(x, vp, rng):  # noqa: ANN001
        return codebook(x, vp, vrng)

    encoder_module.sample_decoded = float_sampler if args.which == "float" else codebook_sampler
    ds = paper_mixture(1_000_000, seed=0) if args.data == "paper" else load_uber(Path(args.data_dir))
    k = 8 if args.data == "paper" else 10
    t = time.perf_counter()
    out = simulate(ds.points, k, args.eps, encoder=args.encoder, bound=ds.bound, seed=args.seed)
    print(json.dumps({"which": args.which, "seed": args.seed, "data": args.data, "n": int(ds.points.shape[0]),
                      "d": int(ds.points.shape[1]), "k": k, "encoder": args.encoder, "eps": args.eps,
                      "objective": out["normalized_objective"], "seconds": time.perf_counter() - t,
                      "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}"}))


if __name__ == "__main__":
    main()
