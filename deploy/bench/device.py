"""``shoal bench --device``: what one device report costs, per round kind, against a floor (issue 45, Build 5).

DESIGN.md ("Protocol: devices in any language") measures a device's cost
against a floor a phone pays whatever the protocol: one random draw of the
dimension of the kind's report vector (d; k(d + 1) for a local refine
round's block vector; 2m reals for a sketch) plus one sealed message
(``common/wire/envelope.py``: an ephemeral X25519 key agreement, HKDF-SHA256
and ChaCha20-Poly1305 of the message). Both are measured in the same run
as the kinds, on the same machine.

For each kind a round is derived as the server derives it (d = 100,
k = 8, eps = 1, n_expected = 1e6), and the device's own code path runs
from (config, point) to the bytes it sends: the kind's ``plan`` and its
message builder (``client/kinds/``), then the body ``Device`` sends (a
local tree report converted to its binary record, a local sketch in its
binary form; sealed messages as the shuffler receives them). No HTTP, no
ledger. ``ms`` is the *minimum* over ``repeats`` reports (the machine is
shared: the minimum is the cost without interference; the median is in
the JSON rows too), ``floor_ms`` the minimum of the floor over the same
number of repeats, ``ratio`` their quotient. The config is derived once
per kind, as a phone does (it joins one round): per-round work a device
caches (the codebook's tables, the sketch's frequencies) is paid on the
first report, which is not the minimum.

``bytes`` is the length of what is sent: the binary record with its
batch header, or the JSON body (sealed: the shuffler submission).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

DIM, K, EPS, DELTA, N_EXPECTED = 100, 8, 1.0, 1e-6, 1_000_000
CONTINUAL_DIM = 2  # a continual round keeps a dense net per level (``kinds/continual.py``): low dimension only


def _cases() -> list[tuple[str, str, str, Any]]:
    """(label, kind name, model, config) of every kind a device can answer, at d = DIM."""
    from shoal.common.bounds import PublicBound
    from shoal.common.kinds.elbow import derive_elbow
    from shoal.server.rounds.kinds import (
        RefineRequest,
        RoundRequest,
        for_encoder,
        local_refine,
        refine,
    )

    bound = PublicBound(radius=1.0)
    out: list[tuple[str, str, str, Any]] = []
    for label, encoder, model, delta, tuning in (
            ("tree lsh local", "lsh", "local", 0.0, {}),
            ("tree nettree local", "nettree", "local", 0.0, {}),
            ("tree nettree shuffle", "nettree", "shuffle", DELTA, {}),
            ("sketch local", "sketch", "local", 0.0, {}),
            ("sketch shuffle", "sketch", "shuffle", DELTA, {}),
            ("partition", "partition", "shuffle", DELTA, {}),
            ("central sealed point", "maxcover", "central", DELTA, {}),
            ("continual", "continual", "central", DELTA, {"horizon": 64})):
        kind = for_encoder(encoder)
        request = RoundRequest(k=K, dim=CONTINUAL_DIM if encoder == "continual" else DIM, epsilon=EPS, n_expected=N_EXPECTED, encoder=encoder, model=model,
                               delta=delta, min_batch=N_EXPECTED // 2 if model != "local" else 0, bound=bound,
                               tuning=tuning)
        out.append((label, kind.name, model, kind.derive(request, f"device-{encoder}-{model}")))
    centers = np.random.default_rng(0).uniform(-0.5, 0.5, (K, DIM))
    for label, child, model in (("refine", refine.KIND, "shuffle"), ("local refine", local_refine.KIND, "local")):
        req = RefineRequest(epsilon=EPS, delta=DELTA, min_devices=N_EXPECTED // 2, model=model)
        out.append((label, child.name, model, child.derive_child("parent", {"centers": centers.tolist()},
                                                                 bound, req, f"device-{child.name}")))
    out.append(("elbow", "elbow", "shuffle", derive_elbow("parent", centers / 2, bound, "kmeans", EPS, DELTA,
                                                         N_EXPECTED // 2, round_id="device-elbow")))
    return out


def report_dim(name: str, config: Any) -> int:
    """The dimension of the kind's report vector: d; k (d + 1) for a local refine
    round's block vector; 2m reals for a sketch."""
    if name == "local_refine":
        return int(config.privunit.dim)
    if name == "sketch":
        return 2 * int(config.sketch.size)
    return int(config.dim)


def _floor(dim: int, key: bytes, message: bytes, round_id: str, seals: int = 1) -> Callable[[], bytes]:
    """One draw of ``dim`` reals from OS-seeded randomness plus ``seals`` seals of ``message``."""
    from shoal.client.encoder import device_rng
    from shoal.common.wire.envelope import seal

    def run() -> bytes:
        device_rng().standard_normal(dim)
        return b"".join(seal(message, key, round_id) for _ in range(seals))

    return run


def _report(name: str, config: Any, key: bytes, x: np.ndarray) -> Callable[[], bytes]:
    """The device's path from (config, point) to the bytes it sends for one report."""
    from shoal.client.device import wire_body
    from shoal.client.kinds import device_kind
    from shoal.client.participation import Participation

    part = Participation(config.round_id, key, "0" * 64, "http://127.0.0.1:1", True, True)
    kind = device_kind(name)

    def run() -> bytes:
        _, make = kind.plan(part, config, x)
        built = make()
        message = built[0] if isinstance(built, tuple) else built
        return wire_body(message)[0]

    return run


def _times(fn: Callable[[], bytes], repeats: int) -> tuple[list[float], int]:
    out, size = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        size = len(fn())
        out.append(1e3 * (time.perf_counter() - t0))
    return out, size


def measure(repeats: int) -> list[dict[str, Any]]:
    """One row per kind: {kind, model, dim, bytes, ms, floor_ms, ratio} (+ median_ms, floor_median_ms)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from shoal.common.wire.envelope import public_key_bytes

    key = public_key_bytes(X25519PrivateKey.generate().public_key())
    x = np.random.default_rng(1).uniform(-0.5, 0.5, DIM)
    rows = []
    for label, name, model, config in _cases():
        report = _report(name, config, key, x[:config.dim])
        report()  # the round's first report: per-round work a device caches
        times, size = _times(report, repeats)
        dim = report_dim(name, config)
        floor = _floor(dim, key, b"\0" * size, config.round_id)
        floor()
        floor_times, _ = _times(floor, repeats)
        ms, floor_ms = min(times), min(floor_times)
        row: dict[str, Any] = {"kind": label, "model": model, "dim": dim, "bytes": size, "ms": round(ms, 4),
               "floor_ms": round(floor_ms, 4), "ratio": round(ms / floor_ms, 2),
               "median_ms": round(statistics.median(times), 4),
               "floor_median_ms": round(statistics.median(floor_times), 4), "seals": seals(report())}
        parts = int(row["seals"])
        if parts > 1:  # the protocol's own floor: each secure-sum share is sealed under its own key
            sealed = _floor(dim, key, b"\0" * (size // parts), config.round_id, parts)
            sealed()
            seals_ms = min(_times(sealed, repeats)[0])
            row.update(seals_floor_ms=round(seals_ms, 4), seals_ratio=round(ms / seals_ms, 2))
        rows.append(row)
    return rows


def seals(body: bytes) -> int:
    """How many sealed envelopes a message holds: a secure-sum submission's
    parts (each share sealed under its own ephemeral key, so that the server
    cannot link a device's shares), one sealed message, or none (local model)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return 0
    if isinstance(parsed, dict) and isinstance(parsed.get("parts"), list):
        return len(parsed["parts"])
    return 1 if isinstance(parsed, dict) and "sealed" in parsed else 0


def import_seconds(module: str, pycache: str | None = None) -> float:
    """Seconds to import ``module`` in one fresh interpreter.

    With ``pycache`` (a folder), bytecode is written there and read back
    (``PYTHONPYCACHEPREFIX``): as an installed wheel imports, with compiled
    modules on both sides of the comparison (this workplace sets
    ``PYTHONDONTWRITEBYTECODE``: shoal's sources were compiled on every
    import while numpy and cryptography ship theirs)."""
    import os

    env = dict(os.environ)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                env=env).stdout)


def import_costs(runs: int = 3) -> dict[str, float]:
    """The device's import against numpy + cryptography's: each the min of
    ``runs`` fresh processes, the two interleaved (a busy machine drifts),
    both with compiled bytecode after one warm-up import (``import_seconds``)."""
    import tempfile

    base_mod = "numpy, cryptography.hazmat.primitives.ciphers.aead, cryptography.hazmat.primitives.asymmetric.x25519"
    with tempfile.TemporaryDirectory(prefix="shoal-pycache-") as pycache:
        import_seconds(base_mod, pycache), import_seconds("shoal.client.device", pycache)
        pairs = [(import_seconds(base_mod, pycache), import_seconds("shoal.client.device", pycache))
                 for _ in range(runs)]
    base, device = min(p[0] for p in pairs), min(p[1] for p in pairs)
    return {"device_s": round(device, 4), "numpy_cryptography_s": round(base, 4), "ratio": round(device / base, 2)}


def markdown(rows: list[dict[str, Any]], imports: dict[str, float], repeats: int) -> str:
    from shoal.deploy.bench.results import machine

    lines = ["# shoal bench --device", "",
             f"machine: {machine()}; d = {DIM}, k = {K}, eps = {EPS:g}, n_expected = {N_EXPECTED:,}; "
             f"ms: the minimum over {repeats} reports after the round's first (`deploy/bench/device.py`); the floor "
             "(one draw of the report vector's dimension + one X25519/HKDF/ChaCha20-Poly1305 seal of the message's "
             "bytes) measured in the same run", "",
             "| kind | model | report dim | bytes on the wire | ms per report | median ms | floor ms | ratio | "
             "sealed parts | floor with every seal, ms | ratio to it |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        extra = (f"{r['seals_floor_ms']:.3f} | {r['seals_ratio']:.1f}" if "seals_ratio" in r else " | ")
        lines.append(f"| {r['kind']} | {r['model']} | {r['dim']} | {r['bytes']:,} | {r['ms']:.3f} | "
                     f"{r['median_ms']:.3f} | {r['floor_ms']:.3f} | {r['ratio']:.1f} | {r['seals']} | {extra} |")
    lines += ["", f"import `shoal.client.device`: {imports['device_s']:.3f} s; numpy + cryptography: "
              f"{imports['numpy_cryptography_s']:.3f} s; ratio {imports['ratio']:.2f} (each the min of 3 fresh "
              "interpreters, bytecode compiled beforehand as in an installed package)"]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    repeats = 3 if args.smoke else 50
    rows = measure(repeats)
    if getattr(args, "json", False):
        print(json.dumps(rows))
        return 0
    imports = import_costs()
    text = markdown(rows, imports, repeats)
    print(text)
    if not args.smoke:
        from shoal.deploy.bench.results import write_results

        write_results(args.out, "device", text, {"rows": rows, "imports": imports, "repeats": repeats})
    return 0
