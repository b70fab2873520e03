"""Who each privacy guarantee holds against, and what it assumes (DESIGN.md,
"Privacy": threat model). Every round's privacy statement carries this
block, in words and as fields, so no number is quoted without its adversary.

Adversaries: a *curious server* (reads everything it stores), a *colluding
shuffler* (the server also learns who sent what), a *hostile server* (lies
in configs, hands out per-device keys, injects messages).
"""

from __future__ import annotations

from typing import Any

PIN = ("devices and the shuffler pin the server's identity key out of band and verify every round config "
       "(signed configs; devices send the digest of what they verified, the shuffler refuses any other)")
SYBIL = ("the shuffler counts distinct enrolled device tokens (issued by the operator at POST /enrol, "
         "rate-limited) and distinct sealed messages: made-up tokens and injected messages are refused, but one "
         "party holding many enrolled tokens counts as many devices (Sybils are not counted out)")


def local_guarantee(epsilon: float) -> dict[str, Any]:
    """A pure eps-LDP report: holds against every adversary, assumes nothing."""
    return {"epsilon": epsilon, "delta": 0.0,
            "against": ["curious server", "colluding shuffler", "hostile server"],
            "assumes": ["the device's randomness is its own (OS entropy) and its ledger refuses rounds beyond "
                        "its cap"],
            "words": f"each device's report is {epsilon:g}-LDP as sent, whoever reads it"}


def shuffled_guarantee(epsilon: float, delta: float, min_batch: int) -> dict[str, Any]:
    """Amplification by shuffling: the server's view of batches of >= min_batch messages."""
    return {"epsilon": epsilon, "delta": delta, "against": ["curious server", "hostile server"],
            "assumes": ["the shuffler does not collude with the server",
                        f"every released batch holds at least {min_batch} messages of distinct devices "
                        "(the shuffler never releases fewer, and re-sends a formed batch unchanged)",
                        PIN, SYBIL],
            "words": f"({epsilon:g}, {delta:g})-DP for the server's view of any shuffled batch of at least "
                     f"{min_batch} distinct devices, if the shuffler does not collude with the server"}


def secure_sum_guarantee(epsilon: float, delta: float, min_devices: int) -> dict[str, Any]:
    """Split-and-mix secure summation: central only; one device's shares alone are not private."""
    return {"epsilon": epsilon, "delta": delta, "against": ["curious server", "hostile server"],
            "assumes": ["the shuffler does not collude with the server",
                        f"at least {min_devices} honest devices add their noise shares to the one flush",
                        PIN, SYBIL],
            "words": f"({epsilon:g}, {delta:g})-DP for the server's view of the sum of at least {min_devices} "
                     "devices, if the shuffler does not collude; no local guarantee (a device's shares alone "
                     "reveal its value plus a small share of the noise)"}


def curator_guarantee(epsilon: float, delta: float) -> dict[str, Any]:
    """Central DP by a trusted curator (the server holds raw points): covers only what it releases."""
    return {"epsilon": epsilon, "delta": delta, "against": ["readers of the result"],
            "assumes": ["the curator (the server, or whoever runs the fit) is trusted with every raw point: "
                        "not against a curious or hostile server",
                        "neighbouring datasets differ by adding or removing one point"],
            "words": f"({epsilon:g}, {delta:g})-DP for the released centers, sizes and coreset; the curator sees "
                     "every raw point, so there is no local guarantee"}


def continual_guarantee(epsilon: float, delta: float, horizon: int) -> dict[str, Any]:
    """Continual observation by a trusted curator: event-level DP over all the releases of the stream."""
    return {"epsilon": epsilon, "delta": delta, "against": ["readers of the result"],
            "assumes": ["the curator (the server) is trusted with every raw point: not against a curious or "
                        "hostile server",
                        "neighbouring streams differ by one item's insertion and its later deletion (event level)"],
            "words": f"({epsilon:g}, {delta:g})-DP for all {horizon} steps' releases together, per item a device "
                     "inserts and withdraws; the curator sees every raw point, so there is no local guarantee"}
