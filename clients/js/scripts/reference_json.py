"""Reference canonical JSON (common/wire/signing.py ``canonical``) for the TypeScript tests.

    .venv/bin/python clients/js/scripts/reference_json.py

writes clients/js/test/fixtures/canonical.json: pairs of (JSON text as a
server may send it, the canonical text Python signs and hashes).
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

from shoal.common.wire.signing import canonical

OUT = Path(__file__).resolve().parents[1] / "test" / "fixtures" / "canonical.json"


def main() -> None:
    rnd = random.Random(3)
    floats = [0.0, -0.0, 1.0, -1.0, 4.0, 0.1, 1e-4, 9.999e-5, 1e-5, 1e-06, 1.5e-300, 5e-324, 1e15, 1e16, 1.2345e16,
              123456789012345.6, 2.0 ** 53, 2.0 ** 63, 1.7976931348623157e308, 0.1008905337009824, 3.4492316246032715,
              2 / 3, 100.0, 1e22, 1e21, 12345678.9]
    floats += [struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0] for _ in range(300)]
    floats = [f for f in floats if f == f and abs(f) != float("inf")]
    floats += [rnd.uniform(-1e6, 1e6) for _ in range(100)] + [rnd.random() * 10.0 ** rnd.randint(-10, 20) for _ in range(100)]
    cases = []
    for f in floats:
        cases.append({"text": json.dumps(f), "canonical": canonical(f).decode()})
    docs = [
        {"b": 1, "a": [1, 2.5, None, True, False], "ü": "é\n\t\"\\\u0001\u007f/\u2028", "seed": 2 ** 63 - 1},
        {"config": {"seed": 4611686018427388003, "epsilon": 4.0, "bound": {"radius": 1.0, "low": None}},
         "server_public_key": "abc+/="},
        {"Z": 0, "a": 0, "_": 0, "aa": 0, "a\u00e9": 0, "\U0001f600": 1, "\uffff": 2},
    ]
    for d in docs:
        cases.append({"text": json.dumps(d, indent=2), "canonical": canonical(d).decode()})
    import pydantic_core  # how pydantic writes floats in messages (PointMessage, StreamMessage)
    for f in floats:
        cases.append({"text": json.dumps(f), "pydantic": pydantic_core.to_json(f).decode()})
    OUT.write_text(json.dumps(cases, ensure_ascii=False) + "\n")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
