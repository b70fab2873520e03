"""Subsampled local sketches (r < m), which protocol/vectors/ does not cover:
the Python device run on fixed private bytes (``common/randomness/device_random.replay``)
and the binary body it sends, for the TypeScript tests.

    .venv/bin/python clients/js/scripts/reference_sketch.py

writes clients/js/test/fixtures/sketch_masks.json.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from shoal.client.sketch_encoder import sketch_body
from shoal.common.bounds import PublicBound
from shoal.common.kinds import dump_config
from shoal.common.kinds.sketch import derive_sketch_round
from shoal.common.randomness import device_random

OUT = Path(__file__).resolve().parents[1] / "test" / "fixtures" / "sketch_masks.json"


def main() -> None:
    cases = []
    rng = np.random.default_rng(4)
    for i, (dim, k, size, r, n0) in enumerate(((3, 2, 16, 4, 1), (4, 3, 32, 8, 3), (2, 2, 12, 5, 2), (6, 2, 64, 17, 4),
                                              (5, 3, 24, 23, 2))):
        config = derive_sketch_round(1000, dim, k, 2.0, bound=PublicBound(radius=2.0), seed=1000 + i,
                                     round_id=f"mask-{i}", size=size, measurements=r)
        points = rng.normal(size=(n0, dim))
        data = hashlib.shake_256(f"sketch-masks-{i}".encode()).digest(1 << 16)
        with device_random.replay(data) as source:
            body = sketch_body(points, config, device_random.generator())
            # the message id comes from token_bytes inside sketch_body
        cases.append({"config": json.dumps(dump_config("sketch", config)), "points": points.tolist(),
                      "device_random": data[:source.position].hex(), "body": body.hex()})
    OUT.write_text(json.dumps(cases) + "\n")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
