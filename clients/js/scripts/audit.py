"""Bit-level privacy audit of the TypeScript device's tree messages (issue 40, item 4).

    npx esbuild scripts/audit-generate.ts --bundle --platform=node --format=esm --outfile=build/audit-generate.mjs
    .venv/bin/python clients/js/scripts/audit.py [--samples 100000] [--broken]

The attack of tests/common/test_bit_level_audits.py
(``test_tree_message_is_eps_ldp_on_the_wire``), on messages the TypeScript
device wrote under Node: for each worst-case input pair and eps, the
attacker replays, for both candidate inputs, whether each message's
histogram report kept its bucket and whether its vector index is in the
cap of +-(sign x direction), and the simultaneous 95% lower bound on the
log likelihood ratio must stay <= eps. With --broken the device's
numerators are those of 3 eps: the bound must then exceed eps (the audit
has teeth). Prints one line per case; exits 1 if any case fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
spec = importlib.util.spec_from_file_location("bit_level", ROOT / "tests/common/test_bit_level_audits.py")
bit_level = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(bit_level)  # type: ignore[union-attr]

from dp_audit import joint_counts, simultaneous_lower_bound  # noqa: E402

from shoal.common.binary_wire import decode_reports  # noqa: E402
from shoal.common.kinds import config_kinds  # noqa: E402
from shoal.common.tree_round import derive_config  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--broken", action="store_true")
    ap.add_argument("--eps", type=float, nargs="*", default=list(bit_level.EPS))
    ap.add_argument("--pairs", nargs="*", default=list(bit_level.MESSAGE_PAIRS))
    args = ap.parse_args()
    gen = ROOT / "clients/js/build/audit-generate.mjs"
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for encoder in ("lsh", "nettree"):
            for eps in args.eps:
                cfg = derive_config(100_000, 4, 4, eps, encoder=encoder, bound=bit_level.BOX, seed=5, levels=3,
                                    vec_share=0.5, vec_candidates=32, root_candidates=32, root_share=0.3)
                text = json.dumps(config_kinds()["tree"].dump(cfg))
                for pair in args.pairs:
                    p1, p2 = bit_level.MESSAGE_PAIRS[pair]
                    job = {"config": text, "points": [p1.tolist(), p2.tolist()], "samples": args.samples,
                           "out": f"{tmp}/m", "broken": args.broken}
                    subprocess.run(["node", str(gen)], input=json.dumps(job).encode(), check=True)
                    codes = []
                    for i in range(2):
                        _, batch = decode_reports(Path(f"{tmp}/m-{i}.bin").read_bytes(), cfg.round_id)
                        codes.append(bit_level._message_codes(batch, cfg, p1) + 16 * bit_level._message_codes(batch, cfg, p2))
                    c1, c2 = joint_counts(*codes)
                    lower = simultaneous_lower_bound(c1, c2)
                    ok = (lower > eps) if args.broken else (lower <= eps and cfg.device_epsilon <= eps)
                    bad += not ok
                    print(f"{'ok ' if ok else 'BAD'} {encoder:7} eps={eps:g} {pair:26} messages/input={args.samples} "
                          f"95% lower bound on the log ratio = {lower:.3f} ({'must exceed' if args.broken else 'claim'} {eps:g})",
                          flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
