"""Bit-level privacy audit of the TypeScript device's messages (issue 40, item 4):
tree rounds, and the kinds a device randomises locally besides (local refine's
codebook PrivUnit, local sketches).

    npx esbuild scripts/audit-generate.ts --bundle --platform=node --format=esm --outfile=build/audit-generate.mjs
    .venv/bin/python clients/js/scripts/audit.py [--kinds tree local_refine local_refine_shared sketch] [--samples 100000] [--broken]

The attacks of tests/common/mechanisms/test_bit_level_audits.py, with their worst-case
input pairs, configs and eps, on messages the TypeScript device wrote under
Node (scripts/audit-generate.ts, through the bundle's own encoders):

- tree (``test_tree_message_is_eps_ldp_on_the_wire``): for both candidate
  inputs, whether each message's histogram report kept its bucket and whether
  its vector index is in the cap of +-(sign x direction);
- local_refine (``test_local_refine_report_is_eps_ldp_on_the_wire``): whether
  the codebook index is in the cap of +-(each candidate's block vector);
  local_refine_shared: the same at PrivUnit dimension 16 (parent centers in
  d = 7), where the device scores the round's shared codebook;
- sketch (``test_sketch_report_is_eps_ldp_on_the_wire``): the grid integers'
  largest residual from each candidate's noiseless sketch, in noise scales,
  and (that statistic alone does not see a noise scale that is too small)
  the log likelihood ratio of the two candidates under the claimed discrete
  Laplace, binned at eighths of eps.

The simultaneous 95% lower bound on the log likelihood ratio must stay <= eps.
With --broken the device's sampler is broken on purpose (PrivUnit and GRR
numerators of 3 eps; sketch noise at a third of its scale; --factor for
another multiple): the bound must then
exceed eps (the audit has teeth). Prints one line per case; exits 1 if any
case fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
spec = importlib.util.spec_from_file_location("bit_level", ROOT / "tests/common/mechanisms/test_bit_level_audits.py")
bit_level = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(bit_level)  # type: ignore[union-attr]

import numpy as np  # noqa: E402
from dp_audit import joint_counts, simultaneous_lower_bound  # noqa: E402

from shoal.common.bounds import PublicBound  # noqa: E402
from shoal.common.kinds import config_kinds  # noqa: E402
from shoal.common.kinds.local_refine import block_vectors, derive_local_refine  # noqa: E402
from shoal.common.kinds.sketch import derive_sketch_round  # noqa: E402
from shoal.common.kinds.tree import derive_config  # noqa: E402
from shoal.common.mechanisms.privunit import PrivUnitParams, cap_members  # noqa: E402
from shoal.common.mechanisms.sketch import frequencies, record_features  # noqa: E402
from shoal.common.wire.binary import decode_reports  # noqa: E402

GEN = ROOT / "clients/js/build/audit-generate.mjs"
FACTOR = 3  # --factor: how broken --broken is (3 x eps; sketch noise at a third of its scale)


def _generate(kind: str, config: dict, points: list, samples: int, out: str, broken: bool) -> list[bytes]:
    job = {"kind": kind, "config": json.dumps(config), "points": [np.asarray(p).tolist() for p in points],
           "samples": samples, "out": out, "broken": broken, "factor": FACTOR}
    subprocess.run(["node", str(GEN)], input=json.dumps(job).encode(), check=True)
    return [Path(f"{out}-{i}.bin").read_bytes() for i in range(len(points))]


def _tree_cases(args, tmp):
    for encoder in ("lsh", "nettree"):
        for eps in args.eps:
            for split, share in bit_level.SPLITS.items():
                cfg = derive_config(100_000, 4, 4, eps, encoder=encoder, bound=bit_level.BOX, seed=5, levels=3,
                                    vec_candidates=32, root_candidates=32, root_share=0.3, **share)
                for pair in args.pairs:
                    p1, p2 = bit_level.MESSAGE_PAIRS[pair]
                    codes = []
                    for body in _generate("tree", config_kinds()["tree"].dump(cfg), [p1, p2], args.samples,
                                          f"{tmp}/m", args.broken):
                        _, batch = decode_reports(body, cfg.round_id)
                        codes.append(bit_level._message_codes(batch, cfg, (p1, p2)))
                    yield f"tree {encoder:7} {split:12}", eps, pair, codes, cfg.device_epsilon, True


def _refine_cases(args, tmp, centers, pairs, label):
    """Local refine messages from the TypeScript device for each pair of inputs; each message's code says
    whether its codebook index is in the cap of +-(each input's block vector)."""
    for eps in args.eps:
        cfg = derive_local_refine("parent", centers, PublicBound(radius=1.0), eps, seed=9)
        cfg = dataclasses.replace(cfg, privunit=PrivUnitParams.calibrate(cfg.privunit.dim, eps, candidates=32))
        for pair, (x1, x2) in pairs.items():
            blocks = block_vectors(np.array([x1, x2]), cfg)
            u = blocks / np.linalg.norm(blocks, axis=1, keepdims=True)
            dirs = np.concatenate([u, -u])
            codes = []
            for body in _generate("local_refine", config_kinds()["local_refine"].dump(cfg), [x1, x2], args.samples,
                                  f"{tmp}/r", args.broken):
                rec = np.frombuffer(body, dtype=np.dtype([("nonce", "<u8"), ("index", "<u4")]))
                n = rec.size
                member = cap_members(rec["nonce"].astype(np.uint64), rec["index"].astype(np.int64),
                                     np.broadcast_to(dirs, (n,) + dirs.shape), cfg.privunit, cfg.codebook_key)
                codes.append(member.astype(np.int64) @ (1 << np.arange(dirs.shape[0])))
            yield label(cfg), eps, pair, codes, cfg.privunit.epsilon, True


def _local_refine_cases(args, tmp):
    """tests/common/mechanisms/test_bit_level_audits.py: test_local_refine_report_is_eps_ldp_on_the_wire."""
    yield from _refine_cases(args, tmp, np.array([[0.5, 0.0], [-0.5, 0.0]]), bit_level.REFINE_PAIRS,
                             lambda cfg: "local_refine")


# From PrivUnit dimension 16 (``privunit_codebook.SHARED_MIN_DIM``) the device scores the round's shared
# codebook under a per-nonce signed permutation: two parent centers in d = 7 give blocks of 2 x (7 + 1) = 16.
SHARED_CENTERS = np.array([[0.5] + [0.0] * 6, [-0.5] + [0.0] * 6])
SHARED_REFINE_PAIRS = {
    "nearest to different centers": (np.array([0.9, 0.1, 0, 0, 0, 0, 0.0]), np.array([-0.9, -0.1, 0, 0, 0, 0, 0.0])),
    "1e-7 either side of the Voronoi boundary": (np.array([-1e-7, 0.3, 0, 0, 0, 0.2, 0.0]),
                                                 np.array([1e-7, 0.3, 0, 0, 0, 0.2, 0.0])),
    "a center vs the ball's edge in its cell": (np.array([0.5, 0, 0, 0, 0, 0, 0.0]), np.array([0, 0, 0, 0, 0, 0, 1.0])),
}


def _shared_local_refine_cases(args, tmp):
    """The local refine cases at PrivUnit dimension 16: the shared-codebook form, as the Python audits'
    ``test_shared_codebook_vec_report_is_eps_ldp_on_the_wire`` (d = 16 and 100) check it for Python."""
    yield from _refine_cases(args, tmp, SHARED_CENTERS, SHARED_REFINE_PAIRS, lambda cfg: f"local_refine d={cfg.privunit.dim}")


def _sketch_cases(args, tmp):
    """tests/common/mechanisms/test_bit_level_audits.py: test_sketch_report_is_eps_ldp_on_the_wire (its params, one record)."""
    for eps in args.eps:
        params = bit_level._sketch_params(eps)
        cfg = derive_sketch_round(100_000, 2, 2, eps, bound=PublicBound(radius=1.0), seed=3, size=params.size,
                                  measurements=params.measurements)
        cfg = dataclasses.replace(cfg, sketch=params)
        omega = frequencies(params)
        noise = params.noise_grid(1)
        width = 2 * params.size
        for pair, recs in SKETCH_PAIRS.items():
            codes, llrs = [], []
            for body in _generate("sketch", config_kinds()["sketch"].dump(cfg), list(recs), args.samples, f"{tmp}/s",
                                  args.broken):
                units = np.frombuffer(body, dtype="<i8").reshape(-1, width).astype(np.float64)
                scale = noise.scale_num / noise.scale_den
                code = np.zeros(units.shape[0], dtype=np.int64)
                l1 = []
                for cand in recs:
                    x = cfg.bound.to_ball(np.asarray(cand, dtype=np.float64)[None, :])  # what the device encodes
                    centre = np.rint(np.ldexp(record_features(x, omega), -noise.exponent))
                    resid = (units - centre) / scale  # in noise scales
                    on_grid = np.ones(units.shape[0], dtype=np.int64)  # grid integers by construction
                    stat = np.digitize(resid.max(axis=1), [-1, 0, 1, 2, 3])
                    code = code * 12 + on_grid * 6 + stat
                    l1.append(np.abs(units - centre).sum(axis=1) / scale)
                # The Python test's statistic above is weak against a noise scale that is too small; the
                # Neyman-Pearson one is the log likelihood ratio of the two candidates under the claimed
                # discrete Laplace, (|u - c2|_1 - |u - c1|_1) / scale, at most ||c1 - c2||_1 / scale <= eps
                # when the noise is right: binned at eighths of eps, it is what catches a broken scale.
                codes.append(code)
                llrs.append(np.digitize(l1[1] - l1[0], eps * np.linspace(-1, 1, 17)))
            yield "sketch (test's statistic)", eps, pair, codes, params.epsilon, False
            yield "sketch (likelihood ratio)", eps, pair, llrs, params.epsilon, pair != "records 1e-6 apart"


# The Python test's sketch pairs, and one more: the farthest of 200,000 random pairs of the unit ball
# by the L1 distance of their noiseless sketches (numpy seed 0, with _sketch_params), 0.80 of the
# sensitivity the noise is scaled to (the axis-aligned pair: 0.56; ball center vs boundary: 0.60).
SKETCH_PAIRS = dict(bit_level.SKETCH_PAIRS, **{
    "farthest found (0.80 of the sensitivity)": (np.array([0.56827413, -0.18855418]), np.array([-0.00988915, 0.99339803]))})

CASES = {"tree": _tree_cases, "local_refine": _local_refine_cases, "local_refine_shared": _shared_local_refine_cases,
         "sketch": _sketch_cases}


def main() -> int:
    global FACTOR
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--broken", action="store_true")
    ap.add_argument("--factor", type=int, default=FACTOR, help="--broken: eps times this (an integer >= 2)")
    ap.add_argument("--eps", type=float, nargs="*", default=list(bit_level.EPS))
    ap.add_argument("--pairs", nargs="*", default=list(bit_level.MESSAGE_PAIRS), help="tree pairs")
    ap.add_argument("--kinds", nargs="*", default=list(CASES), choices=list(CASES))
    args = ap.parse_args()
    FACTOR = args.factor
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds:
            for label, eps, pair, codes, claimed, must_catch in CASES[kind](args, tmp):
                c1, c2 = joint_counts(*codes)
                lower = simultaneous_lower_bound(c1, c2)
                if args.broken:
                    # A broken noise scale is invisible where the candidates' sketches coincide, and to
                    # the test's own sketch statistic: those lines are printed, not judged.
                    ok = lower > eps if must_catch else None
                    verdict = f"must exceed {eps:g}" if must_catch else "not judged"
                else:
                    ok, verdict = lower <= eps and claimed <= eps, f"claim {eps:g}"
                bad += ok is False
                print(f"{'ok ' if ok else '-- ' if ok is None else 'BAD'} {label:25} eps={eps:g} {pair:42} "
                      f"messages/input={len(codes[0])} 95% lower bound on the log ratio = {lower:.3f} ({verdict})",
                      flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
