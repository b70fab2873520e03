"""Privacy amplification by shuffling: central (eps, delta) from a local eps0.

Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly
optimal analysis of privacy amplification by shuffling" (FOCS'21). If each of
n devices applies an eps0-DP local randomiser and the server sees only a
uniformly random permutation of the n messages, the view is (eps, delta)-DP
for datasets that differ in one device's input (replacement neighbours).

Two bounds, both from that paper:

* ``closed_form_epsilon`` -- Theorem 3.1 in the form the authors' reference
  implementation evaluates (arXiv:2012.12803, Appendix E; the code that
  accompanies the paper). With a = 8 sqrt(e^eps0 log(4/delta) / n),
  b = 8 e^eps0 / n and eps' = log(1 + a + b):
  eps = log(1 + (1 - e^-eps0) / (1 + e^(-eps0 - eps')) * (a + b)).
  This is slightly larger (more conservative) than the FOCS Eq. (2) factor
  (e^eps0 - 1)/(e^eps0 + 1) and is what the published example values give.
  Valid for eps0 <= log(n / (16 log(4/delta))) -- the stricter of the two
  conditions stated in the paper and its code (raises outside).
* ``numerical_delta`` / ``numerical_epsilon`` -- the reduction behind it
  (Theorem 3.2): the shuffled view is a post-processing of one of two
  distributions on pairs of counts. With p = e^-eps0, C ~ Bin(n-1, p) (the
  other devices that act as "clones" of device 1), A ~ Bin(C, 1/2) and
  D ~ Bernoulli(e^eps0 / (e^eps0 + 1)):
  P = (A + D, C - A + 1 - D) and Q = (A + 1 - D, C - A + D), so
  delta(eps) <= max(H_{e^eps}(P || Q), H_{e^eps}(Q || P)) (hockey-stick
  divergence; the pair is symmetric, so one direction suffices). We compute
  it exactly: for each c the likelihood ratio P/Q is increasing in the first
  count, so the positive part is one binomial tail (below), vectorised over c;
  the mass of C outside +-12 standard deviations is added to delta whole.

The inverses (largest eps0 meeting a target) are bisections, exact to 1e-4;
``max_local_epsilon`` returns only an eps0 whose central eps, computed by
``central_epsilon`` (the function the statement reports), is <= the target.

Splitting a budget (``spend_left``, ``split_spend``): every derived share
rounds toward less spend, so that the shares' exact sum, and hence every
correctly rounded sum of them (``math.fsum``, ``a + b``), is <= the total.
Pure math, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache

import numpy as np

from shoal.common.errors import PrivacyError
from shoal.common.privacy.events import RoundsEvent, SecureSumEvent, ShuffledEvent, local_epsilon
from shoal.common.privacy.zcdp import composed_epsilon

BOUNDS = ("fmt21-numerical", "fmt21-closed-form")


def _check(eps0: float, n: int) -> None:
    if not (math.isfinite(eps0) and eps0 > 0):
        raise PrivacyError(f"local epsilon must be finite and > 0, got {eps0}")
    if n < 2:
        raise PrivacyError(f"amplification needs at least 2 shuffled messages, got n={n}")


def _check_delta(delta: float) -> None:
    if not (0 < delta < 1):
        raise PrivacyError(f"delta must be in (0, 1), got {delta}")


def closed_form_max_eps0(n: int, delta: float) -> float:
    """The largest eps0 for which Theorem 3.1 applies: log(n / (16 log(4/delta)))."""
    _check_delta(delta)
    return math.log(n / (16 * math.log(4 / delta)))


def closed_form_epsilon(eps0: float, n: int, delta: float) -> float:
    """Central eps of n shuffled eps0-DP messages (FMT'21 Theorem 3.1; see module doc)."""
    _check(eps0, n)
    limit = closed_form_max_eps0(n, delta)
    if eps0 > limit:
        raise PrivacyError(f"the closed form needs eps0 <= log(n/(16 log(4/delta))) = {limit:.4f}; got eps0={eps0}, n={n}")
    e0 = math.exp(eps0)
    ab = 8 * math.sqrt(e0 * math.log(4 / delta) / n) + 8 * e0 / n
    factor = -math.expm1(-eps0) / (1 + math.exp(-eps0 - math.log1p(ab)))
    return min(eps0, math.log1p(factor * ab))


def numerical_delta(eps0: float, n: int, eps: float) -> float:
    """Smallest delta for which n shuffled eps0-DP messages are (eps, delta)-DP,
    by the clone reduction of FMT'21 Theorem 3.2 (an upper bound on the truth)."""
    _check(eps0, n)
    if eps >= eps0:
        return 0.0
    from scipy import stats  # on first use: keeps the device side's import fast (issue 16)

    if eps < 0:
        raise PrivacyError(f"eps must be >= 0, got {eps}")
    p = math.exp(-eps0)
    q = math.exp(eps0) / (math.exp(eps0) + 1)  # P(D = 1)
    ee = math.exp(eps)
    mean, sd = (n - 1) * p, math.sqrt((n - 1) * p * (1 - p))
    lo, hi = max(0, int(mean - 12 * sd) - 1), min(n - 1, int(mean + 12 * sd) + 2)
    c = np.arange(lo, hi + 1)
    w = stats.binom.pmf(c, n - 1, p)
    tail = max(0.0, 1.0 - float(w.sum()))
    # P(a|c)/Q(a|c) > e^eps  <=>  r = a/(c - a + 1) > t  (r is increasing in a).
    t = (ee * q - (1 - q)) / (q - ee * (1 - q))
    a_star = np.floor(t * (c + 1) / (1 + t)).astype(np.int64) + 1

    def sf(k: np.ndarray) -> np.ndarray:  # P(Bin(c, 1/2) >= k)
        return np.asarray(stats.binom.sf(k - 1, c, 0.5))

    s1, s0 = sf(a_star - 1), sf(a_star)  # sums over a >= a* of Bin(a-1) and of Bin(a)
    per_c = q * s1 + (1 - q) * s0 - ee * ((1 - q) * s1 + q * s0)
    return float(min(1.0, float(np.dot(w, np.maximum(per_c, 0.0))) + tail))


def within(total: float, *parts: float | Fraction) -> bool:
    """Whether the exact (rational) sum of ``parts`` is <= ``total``. Then every
    correctly rounded sum of them (``math.fsum``, a two-term ``+``) is <= total
    too: rounding to nearest is monotone and ``total`` is a double. A part may be
    an exact ``Fraction`` (a discrete Laplace's eps s / t, which no double holds)."""
    return sum((Fraction(p) for p in parts), Fraction(0)) <= Fraction(total)


def spend_left(total: float, *spent: float | Fraction) -> float:
    """What a budget ``total`` has left after ``spent``, rounded toward less spend:
    the double x = total - sum(spent) nudged down (``math.nextafter``) until
    ``within(total, x, *spent)``. ``total - a`` in floating point may round up
    (issue 41: eps - refine, then tree + refine, composed above eps); never 0 or
    below unless nothing is left (then 0.0)."""
    x = math.fsum((total, *(-float(s) for s in spent)))
    while x > 0 and not within(total, x, *spent):
        x = math.nextafter(x, 0.0)
    return max(x, 0.0)


def split_spend(total: float, share: float) -> tuple[float, float]:
    """(rest, part): ``part`` = share * total and ``rest`` what is left of total
    (``spend_left``), so rest + part <= total exactly. A share of 0 leaves
    ``total`` whole."""
    if not 0 <= share <= 1:
        raise PrivacyError(f"a budget share must be in [0, 1], got {share}")
    part = total * share
    return spend_left(total, part), part


@lru_cache(maxsize=4096)
def numerical_epsilon(eps0: float, n: int, delta: float, tol: float = 1e-6) -> float:
    """Smallest eps with ``numerical_delta(eps0, n, eps) <= delta`` (bisection).

    The answer is the bisection's upper end, on which ``numerical_delta`` was
    evaluated and met delta: the statement is checked, not interpolated (it may
    lie up to ``tol`` above the true crossing). Cached: pure, and the
    derivations and statements ask for the same (eps0, n, delta) repeatedly."""
    _check(eps0, n)
    _check_delta(delta)
    if numerical_delta(eps0, n, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, eps0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if numerical_delta(eps0, n, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def central_epsilon(eps0: float, n: int, delta: float, bound: str = "fmt21-numerical") -> float:
    """Central eps of n shuffled eps0-DP messages under the named bound (the
    number a shuffle round's statement reports)."""
    if bound == "fmt21-numerical":
        return numerical_epsilon(eps0, n, delta)
    if bound == "fmt21-closed-form":
        return closed_form_epsilon(eps0, n, delta)
    raise PrivacyError(f"unknown amplification bound {bound!r}; known: {BOUNDS}")


@lru_cache(maxsize=4096)
def max_local_epsilon(eps: float, delta: float, n: int, bound: str = "fmt21-numerical", tol: float = 1e-5) -> float:
    """The largest eps0 whose n shuffled messages are (eps, delta)-DP under ``bound``,
    with ``central_epsilon(eps0, n, delta, bound) <= eps`` exactly.

    Never below ``eps`` itself (a device at eps0 = eps meets the target
    without any amplification). Bisection on eps0; both bounds grow with eps0.
    The bisection tests numerical_delta at eps, but the statement reports
    ``central_epsilon`` (its own bisection, which answers up to 1e-6 above the
    crossing: issue 41's 0.5000000707 for a 0.5 target). So the result is
    checked with that very function and, while it reports more than eps,
    stepped back toward eps (doubling steps; eps itself always passes, since
    either bound reports at most eps0). Cached: pure and called per derive.
    """
    if not (math.isfinite(eps) and eps > 0):
        raise PrivacyError(f"central epsilon must be finite and > 0, got {eps}")
    _check_delta(delta)
    if n < 2:
        raise PrivacyError(f"amplification needs at least 2 shuffled messages, got n={n}")
    if bound == "fmt21-numerical":
        def ok(e0: float) -> bool:
            return numerical_delta(e0, n, eps) <= delta
        hi = 40.0
    elif bound == "fmt21-closed-form":
        hi = closed_form_max_eps0(n, delta)
        if hi <= eps:
            return eps

        def ok(e0: float) -> bool:
            return closed_form_epsilon(e0, n, delta) <= eps
    else:
        raise PrivacyError(f"unknown amplification bound {bound!r}; known: {BOUNDS}")
    lo = eps
    if ok(hi):
        lo = hi
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid

    def reported_within(e0: float) -> bool:  # the statement's own number, compared without tolerance
        try:
            return central_epsilon(e0, n, delta, bound) <= eps
        except PrivacyError:
            return False

    step = tol
    while not reported_within(lo):
        if lo <= eps:
            raise PrivacyError(f"no local epsilon gives central eps <= {eps} for n={n}, delta={delta} under {bound}")
        lo, step = max(eps, lo - step), 2 * step
    return lo


def flat_rounds(event: RoundsEvent) -> Iterator[object]:
    """The rounds of a ``RoundsEvent``, nested ones in their place."""
    for e in event.rounds:
        if isinstance(e, RoundsEvent):
            yield from flat_rounds(e)
        else:
            yield e


def gaussian_sums(sums: list[SecureSumEvent]) -> tuple[float, float]:
    """(eps, delta) of discrete-Gaussian secure sums over the same devices: delta the sum of
    theirs, eps the smaller of basic composition's sum and zCDP's (their rhos add, their
    failures add; ``zcdp.composed_epsilon`` at that delta)."""
    eps, delta = math.fsum(e.epsilon for e in sums), math.fsum(e.delta for e in sums)
    if len(sums) > 1:
        rho, failure = math.fsum(e.rho for e in sums), math.fsum(e.failure for e in sums)
        eps = min(eps, composed_epsilon(rho, failure, delta, eps))
    return eps, delta


def central_guarantee(event: object) -> tuple[float, float]:
    """The central (eps, delta) the server's view satisfies.

    A ``ShuffledEvent`` gets the amplification bound it names, a
    ``SecureSumEvent`` its own (eps, delta), a ``RoundsEvent`` the sum over
    its rounds (basic composition; nested ones flattened), except that two or
    more discrete-Gaussian secure sums among them are stated together in zCDP
    when that is smaller (``gaussian_sums``); any other
    event is pure local DP, (local eps, 0). Unknown events raise."""
    if isinstance(event, SecureSumEvent):
        return event.epsilon, event.delta
    if isinstance(event, RoundsEvent):
        rounds = list(flat_rounds(event))
        sums = [e for e in rounds if isinstance(e, SecureSumEvent) and e.rho > 0]
        parts = [central_guarantee(e) for e in rounds if not (isinstance(e, SecureSumEvent) and e.rho > 0)]
        if sums:
            parts.append(gaussian_sums(sums))
        return math.fsum(e for e, _ in parts), math.fsum(d for _, d in parts)
    if isinstance(event, ShuffledEvent):
        eps0 = local_epsilon(event.local)
        return central_epsilon(eps0, event.messages, event.delta, event.bound), event.delta
    return local_epsilon(event), 0.0
