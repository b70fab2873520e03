"""The exponential mechanism, sampled exactly (for the central rounds of seeds 000 and 003).

``choose(scores, epsilon, sensitivity, block=...)`` returns candidate i with
probability proportional to exp(epsilon * score_i / (2 * sensitivity))
(McSherry-Talwar): epsilon-DP for scores whose sensitivity is at most
``sensitivity``. ``block = (size, score)`` adds ``size`` further candidates
that share one score, returned as index ``len(scores)``: the sampling trick
of seed 000 (Alg. 2), where all but the non-empty grid cells of a huge grid
score 0 and ``size`` can be 10^70 (the caller then draws a uniform member).

How it is exact. The mechanism is the argmax of c_i + G_i, with
c_i = epsilon score_i / (2 sensitivity) and G_i independent standard Gumbel
variables (the Gumbel-max identity); the block is one candidate with
c = ln(size) + epsilon score / (2 sensitivity), since the maximum of m
Gumbels is ln m plus a Gumbel. G = -ln(-ln U) for U uniform on (0, 1).
Nothing here draws a floating-point Gumbel: each U is revealed lazily, 64
random bits at a time, so it is known to lie in an interval
[k / 2^b, (k + 1) / 2^b]; G is increasing in U, so c_i + G_i lies in a
rigorous interval. The winner is decided only once its interval's lower end
is above every other candidate's upper end; candidates still in contention
get 64 more bits each and their intervals are recomputed with ``decimal``
(whose ln is correctly rounded) at a precision that grows with the bits.
The first pass uses numpy over all candidates with a margin of 1e-9 (far
above float64 ln's error), so the common case is one vectorised pass.
This is the lazy-comparison idea behind OpenDP's exact noisy max (Canonne
et al. style exact samplers); an attacker replaying the sampler learns
nothing a real-valued mechanism would not give, because the output is the
index only and its law is exactly the mechanism's.

Randomness: pass the curator's Generator seeded from the OS (never the
round's public seed). Pure numpy and the standard library; no I/O.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shoal.common.errors import ConfigError

_MARGIN = 1e-9  # float64 pass: widening of every interval end (ln's error is ~1e-16 relative)


def _check(epsilon: float, sensitivity: float, block: tuple[int, int] | None) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"exponential mechanism: epsilon must be finite and > 0, got {epsilon}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ConfigError(f"exponential mechanism: sensitivity must be finite and > 0, got {sensitivity}")
    if block is not None:
        size, score = block
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ConfigError(f"exponential mechanism: block size must be an integer >= 1, got {size!r}")
        if not isinstance(score, int) or isinstance(score, bool):
            raise ConfigError(f"exponential mechanism: block score must be an integer, got {score!r}")


def _gumbel_float(k: NDArray[np.uint64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Enclosure of G = -ln(-ln U) for U in [k / 2^64, (k + 1) / 2^64], float64 widened by _MARGIN.

    -ln U is -log(U) below U = 1/2 and -log1p(-w) with w = 1 - U = (2^64 - k) / 2^64
    above, so U near 0 and U near 1 (where U itself rounds to 1.0) both keep
    float64's relative accuracy."""
    kf = k.astype(np.float64)
    m = (~k).astype(np.float64) + 1.0  # 2^64 - k up to float64 rounding (k = 0 gives 2^64)
    with np.errstate(divide="ignore"):
        # -ln U from U itself below 1/2 and from 1 - U above, each with full relative accuracy.
        a_lo = np.where(kf < 2.0**63, -np.log(kf / 2.0**64), -np.log1p(-m / 2.0**64))  # k = 0: U = 0, a = inf
        a_hi = np.where(kf < 2.0**63, -np.log((kf + 1.0) / 2.0**64), -np.log1p(-(m - 1.0) / 2.0**64))  # U = 1: a = 0
        g_lo = -np.log(a_lo)
        g_hi = -np.log(a_hi)
    return g_lo - _MARGIN * (1 + np.abs(g_lo)), g_hi + _MARGIN * (1 + np.abs(g_hi))


def _ulps(x: decimal.Decimal, prec: int) -> decimal.Decimal:
    """Ten units in the last place of x at ``prec`` digits (a generous rounding pad)."""
    return decimal.Decimal(10) ** (max(x.adjusted(), -10**6) - prec + 2)


def _gumbel_decimal(num: int, bits: int, up: bool) -> decimal.Decimal | None:
    """G = -ln(-ln(num / 2^bits)), rounded outward (down, or up if ``up``); None
    stands for an infinite end (U = 0 or 1). At bits + 30 digits num / 2^bits
    is exact (num 5^bits / 10^bits has at most ``bits`` digits) and ``decimal``'s
    ln is correctly rounded, so padding each ln by ten ulps is rigorous."""
    if num <= 0 or num >= 1 << bits:
        return None
    prec = bits + 30
    with decimal.localcontext() as ctx:
        ctx.prec = prec
        u = decimal.Decimal(num) / decimal.Decimal(1 << bits)
        a = -(u.ln())  # > 0; G = -ln a decreases in a
        a = a - _ulps(a, prec) if up else a + _ulps(a, prec)
        if a <= 0:
            return None
        g = -(a.ln())
        return g + _ulps(g, prec) if up else g - _ulps(g, prec)


def choose(
    scores: ArrayLike,
    epsilon: float,
    rng: np.random.Generator,
    sensitivity: float = 1.0,
    block: tuple[int, int] | None = None,
    counts: ArrayLike | None = None,
) -> int:
    """Index of the chosen candidate; ``len(scores)`` means "one of the block".

    ``counts``: candidate i stands for counts[i] >= 1 candidates of the same
    score (the law of "which group"; the caller draws the member uniformly),
    so a million sets with a handful of distinct gains cost a handful of draws."""
    _check(epsilon, sensitivity, block)
    u = np.asarray(scores)
    if u.ndim != 1 or (u.size == 0 and block is None):
        raise ConfigError(f"exponential mechanism: scores must be a non-empty 1-D array, got shape {u.shape}")
    if u.size and not np.issubdtype(u.dtype, np.integer):
        raise ConfigError(f"exponential mechanism: scores must be integers (counts), got dtype {u.dtype}")
    mult = None if counts is None else np.asarray(counts)
    if mult is not None and (mult.shape != u.shape or (mult.size and (not np.issubdtype(mult.dtype, np.integer)
                                                                      or mult.min() < 1))):
        raise ConfigError(f"exponential mechanism: counts must be integers >= 1 shaped like the scores {u.shape}, "
                          f"got shape {mult.shape}")
    rate = Fraction(epsilon) / (2 * Fraction(sensitivity))  # exact: floats are dyadic rationals
    n = int(u.size)
    m = n + (block is not None)
    offs = u.astype(np.float64) * float(rate)
    if mult is not None:
        offs = offs + np.log(mult.astype(np.float64))
    if block is not None:
        offs = np.append(offs, float(rate) * block[1] + math.log(block[0]))
    top = np.iinfo(np.uint64).max
    # First pass: 64 bits per U, float64 with a margin, every candidate at once.
    k = rng.integers(0, top, size=m, dtype=np.uint64, endpoint=True)
    g_lo, g_hi = _gumbel_float(k)
    slack = _MARGIN * (1 + np.abs(offs))
    low = offs - slack + g_lo
    high = offs + slack + g_hi
    best = int(np.argmax(low))
    contenders = np.flatnonzero(high >= low[best])
    if contenders.size == 1:
        return best
    # Refine the few contenders exactly: 64 more bits each round, decimal arithmetic, outward rounding.
    live = [int(i) for i in contenders]
    num = {i: int(k[i]) for i in live}
    bits = dict.fromkeys(live, 64)
    while True:
        for i in live:
            num[i] = (num[i] << 64) | int(rng.integers(0, top, dtype=np.uint64, endpoint=True))
            bits[i] += 64
        lows: dict[int, decimal.Decimal] = {}
        highs: dict[int, decimal.Decimal] = {}
        for i in live:
            prec = bits[i] + 30
            with decimal.localcontext() as ctx:
                ctx.prec = prec
                score = block[1] if (block is not None and i == n) else int(u[i])
                c = decimal.Decimal((rate * score).numerator) / decimal.Decimal((rate * score).denominator)
                size = block[0] if (block is not None and i == n) else (1 if mult is None else int(mult[i]))
                if size > 1:
                    c += decimal.Decimal(size).ln()
                g_l = _gumbel_decimal(num[i], bits[i], False)
                g_h = _gumbel_decimal(num[i] + 1, bits[i], True)
                if g_l is None:
                    lows[i] = decimal.Decimal("-Infinity")
                else:
                    v = c + g_l
                    lows[i] = v - _ulps(v, prec) - _ulps(c, prec)
                if g_h is None:
                    highs[i] = decimal.Decimal("Infinity")
                else:
                    v = c + g_h
                    highs[i] = v + _ulps(v, prec) + _ulps(c, prec)
        lead = max(live, key=lambda i: lows[i])
        live = [i for i in live if i == lead or highs[i] >= lows[lead]]
        if len(live) == 1:
            return live[0]


def probabilities(scores: ArrayLike, epsilon: float, sensitivity: float = 1.0,
                  block: tuple[int, int] | None = None, counts: ArrayLike | None = None) -> NDArray[np.float64]:
    """The mechanism's exact law (in float64), for tests and the utility statement."""
    _check(epsilon, sensitivity, block)
    u = np.asarray(scores, dtype=np.float64)
    logits = u * epsilon / (2 * sensitivity)
    if counts is not None:
        logits = logits + np.log(np.asarray(counts, dtype=np.float64))
    if block is not None:
        logits = np.append(logits, math.log(block[0]) + block[1] * epsilon / (2 * sensitivity))
    logits -= logits.max()
    w = np.exp(logits)
    return w / w.sum()
