"""Checks TypeScript-device messages with the Python implementation.

    node build/crosscheck.mjs 300 > build/crosscheck.jsonl
    .venv/bin/python clients/js/scripts/crosscheck.py clients/js/build/crosscheck.jsonl

For every message: pydantic parses it and writes the same bytes back; the
server's validation (``ReportBatch.from_messages(...).validate``) accepts
the batch; the binary form decodes to the same reports and message id; a
hist report's true bucket (recomputed here from the point) is the one the
TypeScript device hashed; a vector report's index is in the cap that Python
computes from the TypeScript device's sphere point exactly when the device
says it picked the cap (bit-level agreement of candidates and cap).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np

from shoal.common.kinds import config_kinds
from shoal.common.kinds.tree_nets import node_space
from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.common.mechanisms.privunit import cap_members
from shoal.common.randomness.hashing import bucket_hash
from shoal.common.wire.binary import decode_reports
from shoal.common.wire.messages import ReportBatch
from shoal.common.wire.models import DeviceMessage


def main(path: str) -> None:
    ref = json.load(open("clients/js/test/fixtures/reference.json"))
    configs = {c["name"]: config_kinds()["tree"].parse(json.loads(c["config_text"])) for c in ref["tree"]}
    rows = [json.loads(line) for line in open(path)]
    by_case = defaultdict(list)
    for r in rows:
        by_case[r["case"]].append(r)
    bad = 0
    for name, rs in by_case.items():
        config = configs[name]
        public = PublicRandomness.from_config(config)
        space = node_space(config)
        msgs = [DeviceMessage.model_validate_json(r["message"]) for r in rs]
        same = sum(m.model_dump_json() == r["message"] for m, r in zip(msgs, rs, strict=False))
        batch = ReportBatch.from_messages(msgs, config)
        batch.validate(config)
        body = bytes.fromhex("".join([rs[0]["binary"][:10]] + [r["binary"][10:] for r in rs]))
        ids, bb = decode_reports(body, config.round_id)
        binary_ok = ids == [m.message_id for m in msgs] and all(
            np.array_equal(getattr(bb, f), getattr(batch, f))
            for f in ("hist_level", "hist_seed", "hist_bucket", "vec_level", "vec_row", "vec_nonce", "vec_index"))
        bucket_ok = cap_ok = hist_n = vec_n = cap_in = 0
        for m, r in zip(msgs, rs, strict=False):
            x = config.bound.to_ball(np.asarray([r["point"]]))
            if m.hist is not None:
                hist_n += 1
                path = space.paths(x)
                key = space.keys(m.hist.level, path[m.hist.level])
                tb = int(bucket_hash(public.hist_seeds[m.hist.seed_index:m.hist.seed_index + 1], key, config.hist_buckets)[0])
                bucket_ok += tb == r["true_bucket"] and (m.hist.bucket == tb) >= bool(r["keep"])
            if m.vec is not None:
                vec_n += 1
                params = config.root_params if m.vec.level == 0 else config.vec_params
                member = cap_members(np.array([int(m.vec.nonce, 16)], dtype=np.uint64), np.array([m.vec.index]),
                                     np.asarray([r["u"]]), params, public.vec_key)[0]
                cap_ok += bool(member) == bool(r["in_cap"])
                cap_in += bool(member)
        ok = same == len(rs) and binary_ok and bucket_ok == hist_n and cap_ok == vec_n
        bad += not ok
        print(f"{name}: {len(rs)} messages; pydantic bytes identical {same}/{len(rs)}; server validation ok; "
              f"binary {'ok' if binary_ok else 'MISMATCH'}; true buckets {bucket_ok}/{hist_n}; "
              f"cap membership agrees {cap_ok}/{vec_n} ({cap_in} in the cap)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1])
