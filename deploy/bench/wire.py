"""``shoal bench --wire``: the bytes a device sends, per round kind (issue 19, Builds 4 and 5).

For each round kind, a round is derived as the server derives it (the
kinds' own ``derive`` / ``derive_child``) and 200 devices answer it through
their kind's encoder (``client/kinds``); the figures are the exact sizes
of what a device sends:

- ``direct JSON``: the report's JSON body to ``POST /rounds/{id}/reports``;
- ``binary``: its record in a ``POST /rounds/{id}/reports/binary`` batch
  (``common/wire/binary.py``; tree rounds only);
- ``to the shuffler``: the submission to the shuffler (the report sealed
  to the server, base64, in JSON; a secure-sum device's ``s`` sealed
  shares in one submission);

beside the randomiser's output: the bits of information the device must
send whatever the encoding (tree: the 22-byte row; codebook: nonce and
index, 10 bytes; a secure-sum share: ``L + 1`` values of ``bits`` bits;
reals: 8 bytes each).

The secure-sum rows also give the share count ``s`` per device from
``secure_sum.shares_rule`` for n = 1e3 .. 1e8 at a fixed (eps, delta),
next to the rule's reproduction of Balle, Bell, Gascon, Nissim's published
operating point (n = 1e4 parties, 32-bit values, statistical security
2^-40 -> 12 messages; "Improved summation from shuffling", 2019, whose
analysis is the one in their CCS'20 paper). Their theorem's exact
constant could not be read offline (``common/mechanisms/secure_sum.py``), so no
other point of theirs is claimed here.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shoal.client.kinds import device_kind
from shoal.client.participation import Participation
from shoal.common.bounds import PublicBound
from shoal.common.mechanisms.secure_sum import MIN_SIGMA, shares_rule
from shoal.common.wire.binary import RECORD
from shoal.common.wire.envelope import public_key_bytes
from shoal.deploy.bench.results import machine, write_results
from shoal.server.rounds.kinds import (
    RefineRequest,
    RoundRequest,
    for_encoder,
    local_refine,
    refine,
    server_kind,
)

DEVICES = 200
DIM, K, EPS, DELTA = 10, 8, 1.0, 1e-6
SHARE_NS = (10**3, 10**4, 10**5, 10**6, 10**7, 10**8)


def _cases(n: int) -> list[tuple[str, str, Any]]:
    """(label, kind name, config) of every kind a device can answer."""
    bound = PublicBound(radius=1.0)
    out: list[tuple[str, str, Any]] = []
    for label, encoder, model, delta in (("tree, local (nettree)", "nettree", "local", 0.0),
                                         ("tree, local (lsh)", "lsh", "local", 0.0),
                                         ("tree, shuffle (nettree)", "nettree", "shuffle", DELTA),
                                         ("sketch, local", "sketch", "local", 0.0),
                                         ("sketch, shuffle (secure sum)", "sketch", "shuffle", DELTA),
                                         ("partition, shuffle (secure sum)", "partition", "shuffle", DELTA),
                                         ("central (sealed point)", "maxcover", "central", DELTA)):
        kind = for_encoder(encoder)
        request = RoundRequest(k=K, dim=DIM, epsilon=EPS, n_expected=n, encoder=encoder, model=model, delta=delta,
                               min_batch=n // 2 if model == "shuffle" else 0, bound=bound)
        out.append((label, kind.name, kind.derive(request, f"wire-{encoder}-{model}")))
    parent = {"centers": np.random.default_rng(0).uniform(-0.5, 0.5, (K, DIM)).tolist()}
    for label, child, model in (("refine, shuffle (secure sum)", refine.KIND, "shuffle"),
                                ("local refine (codebook)", local_refine.KIND, "local")):
        req = RefineRequest(epsilon=EPS, delta=DELTA, min_devices=max(2, n // 2), model=model)
        out.append((label, child.name, child.derive_child("parent", parent, bound, req, f"wire-{child.name}")))
    return out


def _payload_bytes(kind: str, config: Any) -> float:
    """The randomiser's output per device, in bytes (module docstring)."""
    params = getattr(config, "secure_sum", None)
    if params is not None:
        return params.shares * (params.length + 1) * params.bits / 8
    if kind == "tree":
        return float(RECORD["row"].itemsize)
    if kind == "local_refine":
        return 10.0  # a 64-bit nonce and a 16-bit index
    width, _ = server_kind(kind).row_width(config)
    return 8.0 * width


def measure(n: int) -> list[dict[str, Any]]:
    key = public_key_bytes(X25519PrivateKey.generate().public_key())
    points = np.random.default_rng(1).uniform(-0.5, 0.5, (DEVICES, DIM))
    rows = []
    for label, name, config in _cases(n):
        part = Participation(config.round_id, key, "0" * 64, "http://127.0.0.1:1", True, True)
        sim = device_kind(name).simulate(config, points, 1)
        kind = server_kind(name)
        row: dict[str, Any] = {"round": label, "kind": name, "payload_bytes": _payload_bytes(name, config),
                               "direct_json": None, "binary": None, "to_shuffler": None}
        if sim.shares is not None:
            row["shares_per_device"] = int(sim.shares.shape[1])
            row["to_shuffler"] = float(np.mean([len(part.secure_sum_message(sim.shares[i:i + 1]))
                                                for i in range(sim.shares.shape[0])]))
        else:
            bodies = [m.model_dump_json() for m in sim.messages or []]
            if not isinstance(kind.direct_model(config), str):
                row["direct_json"] = float(np.mean([len(b) for b in bodies]))
            if not isinstance(kind.sealed_model(config), str):
                row["to_shuffler"] = float(np.mean([len(part.sealed(b)) for b in bodies]))
            if name == "tree" and not isinstance(kind.direct_model(config), str):
                row["binary"] = float(RECORD.itemsize)
        rows.append(row)
    return rows


def share_counts() -> list[dict[str, Any]]:
    """Shares per device by ``shares_rule`` at sigma = MIN_SIGMA (the floor ``derive`` uses for
    delta >= 2^-40 (1 + e^eps)) and 32-bit values, over n; and the published point."""
    out = [{"n": n, "bits": 32, "sigma": MIN_SIGMA, "shares": shares_rule(MIN_SIGMA, 32, n)} for n in SHARE_NS]
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _markdown(rows: list[dict[str, Any]], shares: list[dict[str, Any]], n: int) -> str:
    lines = ["# shoal bench --wire", "",
             f"machine: {machine()}; each round derived for n_expected = {n:,}, d = {DIM}, k = {K}, eps = {EPS:g} "
             f"(delta = {DELTA:g} where the model needs one); {DEVICES} devices on uniform points; exact bytes of what "
             "a device sends (`deploy/bench/wire.py`)", "",
             "| round | randomiser output B | direct JSON B | binary B | to the shuffler B | shares per device | "
             "smallest sent / output |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        sent = [v for v in (r["direct_json"], r["binary"], r["to_shuffler"]) if v is not None]
        lines.append(f"| {r['round']} | {r['payload_bytes']:,.1f} | {_fmt(r['direct_json'])} | {_fmt(r['binary'])} | "
                     f"{_fmt(r['to_shuffler'])} | {r.get('shares_per_device', '-')} | {min(sent) / r['payload_bytes']:.2f} |")
    lines += ["", "Secure-sum shares per device, `shares_rule` (2^-40 statistical security, 32-bit values); "
              "Balle, Bell, Gascon, Nissim publish 12 messages at n = 1e4, 32 bits, 2^-40:", "",
              "| n | shares per device |", "|---|---|"]
    lines += [f"| {s['n']:.0e} | {s['shares']} |" for s in shares]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    n = 10_000 if args.smoke else 1_000_000
    rows, shares = measure(n), share_counts()
    published = shares_rule(MIN_SIGMA, 32, 10**4)
    text = _markdown(rows, shares, n)
    print(text)
    if published != 12 or any(not math.isfinite(r["payload_bytes"]) for r in rows):
        print(f"wire bench: shares_rule gives {published} at n = 1e4, 32 bits, sigma = 40 (published: 12)")
        return 1
    if not args.smoke:
        write_results(args.out, "wire", text, {"rows": rows, "shares": shares})
    return 0
