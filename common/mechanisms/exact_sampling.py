"""Exact samplers for the noise that leaves a device: integers in, integers out.

Floating-point noise leaks (Mironov, CCS'12): a textbook Laplace draw
``loc + b * log(2U)`` with U on the 2^-53 grid reaches a set of doubles that
depends on ``loc``, so an attacker who replays the sampler tells inputs
apart whatever eps is claimed. Every randomiser in shoal therefore decides
with integer arithmetic only:

- ``dyadic_below(p)`` turns a probability into a numerator A with
  A / 2^32 <= p, and ``bernoulli_dyadic`` draws Bernoulli(A / 2^32) as
  ``integers(0, 2^32) < A``: exact for an ideal uniform integer source
  (numpy's ``Generator.integers`` uses Lemire's unbiased rejection);
- ``bernoulli_exp_neg`` draws Bernoulli(exp(-gamma)) for rational
  gamma = num / den in [0, 1] (Canonne, Kamath, Steinke, NeurIPS'20, Alg. 1:
  K = 1; while Bernoulli(gamma / K): K += 1; return K odd), with every coin
  an integer comparison: coin K is Bernoulli(gamma) (U(den) < num) and
  Bernoulli(1 / K), and the 1 / K coins of one draw come from a single
  uniform below 20! (``_factorial_stops``: P(J > k) = 1 / k! exactly);
- ``discrete_laplace`` draws P(z) ~ exp(-|z| s / t) on the integers for
  positive integers s, t (same paper, Alg. 2), vectorised over many samples:
  each pass reads a batch of i.i.d. proposals (``oversampled``), the
  geometric counts are the runs of one stream of trials (``_runs``), so a
  draw of thousands of samples is a handful of whole-array passes;
- ``discrete_gaussian`` draws P(z) ~ exp(-z^2 / (2 S)) for an integer
  variance parameter S, truncated to |z| <= T (same paper, Alg. 3, with
  proposals beyond T rejected so every integer stays below 2^63);
- ``bernoulli_exp_neg_rational`` / ``_mixed`` draw Bernoulli(exp(-x)) for
  any rational x >= 0 (exp(-1)^floor(x) by a geometric count, times Alg. 1
  for the fraction), and ``poisson_rational`` draws Poisson(num / den) by
  von Neumann's rejection from a geometric proposal of ratio mu, accepted
  with probability 1 / K! (used by the secure sum's Polya shares,
  ``distributed_noise``).

The order in which these read the device's private randomness is part of
the protocol (``docs/protocol/samplers.md``; the conformance vectors and
the TypeScript device, ``clients/js/src/samplers.ts``, follow it).

Randomisers state their privacy with the exact rationals they use (the
event records in ``events.py``), so what is claimed is what is sampled.

Why not OpenDP, whose samplers are built for this: measured here (opendp
0.16, 2026-11), 9.0 microseconds per discrete Laplace sample and 265 MB
installed. A device sketch (2m = 2,000 reals) would be fine, but the
simulations and benchmarks draw up to 2e9 samples and the device install
must stay small; this module's sampler measured 0.45-0.65 microseconds per
sample here with one numpy pass per Alg. 1 coin, and 0.16-0.22 since its
coins are batched (2026-11, 2^20 draws at t / s in {2^31 / 2^10, 5000 /
2^10, 866}, process time on the loaded 2-core machine, where the old code
measured 0.57-0.72 in the same run; ``tests/common/mechanisms/test_exact_sampling.py``
checks it against the exact pmf).

Over 300 lines because these samplers are one family: they share the
batched coins (the 1/k stops, the runs of Bernoulli(exp(-1)) trials) and
their read order is one section of the wire protocol
(``docs/protocol/samplers.md``), which the TypeScript device reproduces bit
for bit; split, the order would be spread over modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError

DYADIC_BITS = 32
DYADIC_ONE = 1 << DYADIC_BITS
MAX_SCALE_NUMERATOR = 1 << 50  # U + t V stays far below 2^63 for V < 2^12


def dyadic_below(p: float) -> int:
    """The largest A with A / 2^32 <= p (p in [0, 1]), computed exactly."""
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"a probability must be in [0, 1], got {p}")
    return int(math.floor(Fraction(p) * DYADIC_ONE))


def bernoulli_dyadic(numerator: int, size: int | tuple[int, ...], rng: np.random.Generator) -> NDArray[np.bool_]:
    """Bernoulli(numerator / 2^32), exactly: one uniform 32-bit integer per draw."""
    if not 0 <= numerator <= DYADIC_ONE:
        raise ConfigError(f"dyadic numerator must be in [0, 2^32], got {numerator}")
    return rng.integers(0, DYADIC_ONE, size=size, dtype=np.int64) < numerator


def log_ratio_upper(numerator: int, denominator: int) -> float:
    """An upper bound (by 1e-12 relative) on log(numerator / denominator) for
    positive integers: the eps that a likelihood ratio of that exact value is."""
    if numerator <= 0 or denominator <= 0:
        raise ConfigError(f"log ratio needs positive integers, got {numerator}/{denominator}")
    value = math.log(numerator) - math.log(denominator)
    return value + 1e-12 * max(1.0, abs(value))


@lru_cache(maxsize=1024)
def grr_keep_numerator(epsilon: float, outcomes: int) -> int:
    """Randomised response over ``outcomes`` values kept with probability
    A / 2^32: the largest A with exact ratio A (g - 1) / (2^32 - A) <= e^eps."""
    if outcomes < 2 or not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"randomised response needs >= 2 outcomes and eps > 0, got {outcomes}, {epsilon}")
    e = math.exp(epsilon)
    a = min(dyadic_below(e / (e + outcomes - 1)), DYADIC_ONE - 1)
    while log_ratio_upper(a * (outcomes - 1), DYADIC_ONE - a) > epsilon:
        a -= 1 + a // 10**9
    return a


# The factorial stop J (P(J > k) = 1 / k!) from one uniform integer below 20!:
# J = k iff 20! / k! <= Z < 20! / (k - 1)!; Z = 0 means J > 20 (probability
# 1 / 20!), continued coin by coin.
STOP_LEVELS = 20
STOP_RANGE = math.factorial(STOP_LEVELS)  # 20! < 2^62
_STOP_THRESHOLDS = np.array([STOP_RANGE // math.factorial(k) for k in range(STOP_LEVELS, 0, -1)], dtype=np.int64)
_STOP_HALF, _STOP_SIXTH = np.int64(STOP_RANGE // 2), np.int64(STOP_RANGE // 6)


def oversampled(m: int) -> int:
    """Proposals a pass reads when m outputs are still missing: m + floor(5 m / 8) + 16."""
    return m + (5 * m) // 8 + 16


def _factorial_stops(n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """n independent J with P(J > k) = 1 / k! (k >= 0): J is the first k >= 1
    whose coin Bernoulli(1 / k) fails (coin 1 never fails), so J >= 2.

    One uniform Z in [0, 20!) decides the first 20 coins at once: the events
    {J > k} = {Z < 20! / k!} are nested with exactly the probabilities 1 / k!.
    Z = 0 (J > 20) continues with fresh coins in index order: k = 21; while
    U(k) = 0: k = k + 1; J = k."""
    z = rng.integers(0, STOP_RANGE, size=n, dtype=np.int64)
    j = (z < _STOP_HALF).astype(np.int64)
    j += 2
    deep = np.flatnonzero(z < _STOP_SIXTH)  # J >= 4: one in six
    if deep.size:
        j[deep] = (STOP_LEVELS + 1) - np.searchsorted(_STOP_THRESHOLDS, z[deep], side="right")
    if n and not z.all():
        for i in np.flatnonzero(z == 0):
            k = STOP_LEVELS + 1
            while int(rng.integers(0, k)) == 0:
                k += 1
            j[i] = k
    return j


def _runs(n: int, trials: Callable[[int], NDArray[np.bool_]], block: Callable[[int], int]) -> NDArray[np.int64]:
    """n independent run lengths: the successes before each failure in one
    stream of i.i.d. trials, read in blocks of ``block(still missing)``
    trials. A run that reaches a block's end continues into the next block;
    trials after the n-th failure are read and discarded."""
    out = np.zeros(n, dtype=np.int64)
    done, carry = 0, 0
    while done < n:
        need = n - done
        ok = trials(block(need))
        fails = np.flatnonzero(~ok)[:need]
        f = fails.size
        if f:
            runs = out[done:done + f]
            runs[0] = fails[0] + carry
            np.subtract(fails[1:], fails[:-1], out=runs[1:])
            runs[1:] -= 1
            done += f
            carry = ok.size - 1 - int(fails[-1])
        else:
            carry += ok.size
    return out


def _first_stops(num: NDArray[np.int64], stops: NDArray[np.int64], den: int,
                 rng: np.random.Generator) -> NDArray[np.int64]:
    """K = min(J_A, J) per element, given that coin 1 passed: J from ``stops``;
    J - 2 draws A_2 .. A_{J-1} = U(den) per element, all read (element by
    element, one flat draw); J_A is the first k >= 2 with A_k >= num, and
    K = J when none is."""
    cnt = stops - 2
    a = rng.integers(0, den, size=int(cnt.sum()), dtype=np.int64)
    owner = np.repeat(np.arange(stops.size), cnt)
    pos = np.flatnonzero(a >= num[owner])
    k = stops.copy()
    if pos.size:
        own = owner[pos]
        first = np.empty(own.size, dtype=bool)
        first[0] = True
        np.not_equal(own[1:], own[:-1], out=first[1:])
        own, pos = own[first], pos[first]
        k[own] = pos - (np.cumsum(cnt)[own] - cnt[own]) + 2
    return k


def bernoulli_exp_neg(
    num: NDArray[np.int64], den: int, rng: np.random.Generator
) -> NDArray[np.bool_]:
    """Bernoulli(exp(-num / den)) per element, for 0 <= num <= den (CKS Alg. 1).

    Alg. 1 stops at the first K >= 1 whose coin Bernoulli(gamma / K) fails,
    gamma = num / den, and returns (K odd); P(K > k) = gamma^k / k!. Coin k
    is drawn here as two independent coins, Bernoulli(gamma) (A_k = U(den) <
    num) and Bernoulli(1 / k) (always 1 for k = 1): K is the first k where
    either fails, i.e. the minimum of J (the first failing 1 / k coin; one
    uniform below 20! for all of them: ``_factorial_stops``) and J_A (the
    first A_k >= num). Reads: A_1 for every element; then, for the elements
    whose A_1 passed, a Z each and then their A_2 .. A_{J-1}
    (``_first_stops``). A few whole-array passes, no loop over K.
    """
    num = np.asarray(num, dtype=np.int64)
    if den < 1 or (num.size and (int(num.min()) < 0 or int(num.max()) > den)):
        raise ConfigError(f"bernoulli_exp_neg needs 0 <= num <= den, den = {den}")
    flat = num.ravel()
    k = np.ones(flat.size, dtype=np.int64)  # K = 1 where coin 1 fails
    go = np.flatnonzero(rng.integers(0, den, size=flat.size, dtype=np.int64) < flat)
    if go.size:
        k[go] = _first_stops(flat[go], _factorial_stops(go.size, rng), den, rng)
    return (k % 2 == 1).reshape(num.shape)


def _exp_neg1_trials(n: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    """n Bernoulli(exp(-1)) trials: Alg. 1 with gamma = 1 is (J odd), one Z each."""
    return _factorial_stops(n, rng) % 2 == 1


def _geometric_exp_neg1(n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """V with P(V = v) = (1 - 1/e) e^-v: the successes of Bernoulli(exp(-1))
    trials before a failure, the n draws being the runs of one trial stream
    (``_runs``, blocks of ``oversampled(still missing)`` trials)."""
    return _runs(n, lambda size: _exp_neg1_trials(size, rng), oversampled)


def discrete_laplace(scale_num: int, scale_den: int, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``size`` integers with P(z) proportional to exp(-|z| scale_den / scale_num) (CKS Alg. 2).

    The scale is the exact rational t / s = scale_num / scale_den. A
    proposal: W = U(2t), U = floor(W / 2) uniform on {0..t-1} and B = W mod 2
    a fair sign; accept with Bernoulli(exp(-U / t)); V geometric with ratio
    1/e; X = U + t V is then geometric with ratio exp(-1/t); Y = floor(X / s);
    reject (B = 1, Y = 0); return (1 - 2B) Y. A pass with m outputs missing
    reads ``oversampled(m)`` proposals at once, draws V for the first m that
    pass the exp(-U / t) coin only, and fills the missing outputs in order
    with the survivors: i.i.d. proposals, so each output has the exact law.
    """
    t, s = int(scale_num), int(scale_den)
    if not (1 <= t <= MAX_SCALE_NUMERATOR and s >= 1):
        raise ConfigError(f"discrete Laplace scale must be t/s with 1 <= t <= 2^50, s >= 1; got {t}/{s}")
    out = np.empty(size, dtype=np.int64)
    done = 0
    while done < size:
        m = size - done
        w = rng.integers(0, 2 * t, size=oversampled(m), dtype=np.int64)
        u = w >> 1
        idx = np.flatnonzero(bernoulli_exp_neg(u, t, rng))[:m]
        u, neg = u[idx], (w[idx] & 1) == 1
        y = (u + t * _geometric_exp_neg1(idx.size, rng)) // s
        ok = ~(neg & (y == 0))
        z = np.where(neg, -y, y)[ok]
        out[done:done + z.size] = z
        done += z.size
    return out


def bernoulli_exp_neg_mixed(whole: NDArray[np.int64], num: NDArray[np.int64], den: int,
                            rng: np.random.Generator) -> NDArray[np.bool_]:
    """Bernoulli(exp(-(whole + num / den))) per element, for integers whole >= 0
    and 0 <= num <= den.

    exp(-x) = exp(-1)^whole exp(-num / den): a V geometric with ratio 1/e
    has P(V >= whole) = e^-whole exactly, and Alg. 1 draws the fraction;
    the two are independent, so their conjunction has the product as its
    probability (the split ``discrete_gaussian`` uses). Reads: V for the
    elements with whole >= 1 only (in order), then Alg. 1 for all."""
    whole = np.asarray(whole, dtype=np.int64)
    if whole.size and int(whole.min()) < 0:
        raise ConfigError("bernoulli_exp_neg_mixed needs whole >= 0")
    flat = whole.ravel()
    ok = np.ones(flat.size, dtype=bool)
    need = np.flatnonzero(flat)  # V >= 0 always: V is drawn only where whole >= 1
    if need.size:
        ok[need] = _geometric_exp_neg1(need.size, rng) >= flat[need]
    return np.asarray(ok.reshape(whole.shape) & bernoulli_exp_neg(num, den, rng))


def bernoulli_exp_neg_rational(num: NDArray[np.int64], den: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    """Bernoulli(exp(-num / den)) per element, for any integers num >= 0, den >= 1."""
    num = np.asarray(num, dtype=np.int64)
    if den < 1 or (num.size and int(num.min()) < 0):
        raise ConfigError(f"bernoulli_exp_neg_rational needs num >= 0 and den >= 1, got den = {den}")
    return bernoulli_exp_neg_mixed(num // den, num % den, den, rng)


def poisson_block(m: int) -> int:
    """Trials a Poisson proposal pass reads per block when m runs are missing: m + floor(m / 8) + 16."""
    return m + m // 8 + 16


def _poisson_below_one(num: int, den: int, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Poisson(mu) for mu = num / den < 1, by rejection (von Neumann; Flajolet,
    Pelletier, Soria 2011): propose K geometric with ratio mu (a run of
    U(den) < num coins, ``_runs``), accept with probability 1 / K! (a
    factorial stop J > K; always for K <= 1, so no Z is read then). P(K = k)
    accepted ~ mu^k / k!, the Poisson pmf; a pass accepts with probability
    (1 - mu) e^mu (>= 0.82 for mu <= 1/2, ~1 for the secure sum's tiny rates).
    Each pass gives every missing draw one proposal, in index order."""
    out = np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        k = _runs(todo.size, lambda size: rng.integers(0, den, size=size, dtype=np.int64) < num, poisson_block)
        ok = np.ones(todo.size, dtype=bool)
        big = np.flatnonzero(k >= 2)
        if big.size:
            ok[big] = _factorial_stops(big.size, rng) > k[big]
        out[todo[ok]] = k[ok]
        todo = todo[~ok]
    return out


def poisson_rational(num: int, den: int, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``size`` exact Poisson(num / den) draws for integers num >= 0, den >= 1:
    the sum of c = ceil(2 num / den) independent Poisson(num / (c den)) draws,
    each of rate <= 1/2 (``_poisson_below_one``)."""
    if num < 0 or den < 1 or den > MAX_SCALE_NUMERATOR:
        raise ConfigError(f"poisson_rational needs num >= 0 and 1 <= den <= 2^50, got {num}/{den}")
    out = np.zeros(size, dtype=np.int64)
    pieces = -(-2 * num // den)
    for _ in range(pieces):
        out += _poisson_below_one(num, den * pieces, size, rng)
    return out


def laplace_scale_fraction(sensitivity: int, epsilon: float, den_bits: int = 10) -> tuple[int, int]:
    """The rational noise scale t / s >= sensitivity / epsilon with s = 2^den_bits.

    ``discrete_laplace(t, s)`` with this scale is eps'-DP for integer L1
    sensitivity ``sensitivity``, eps' = sensitivity s / t <= epsilon (epsilon
    is a double, hence an exact dyadic rational: ``Fraction`` keeps it so)."""
    if sensitivity < 1 or not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"laplace scale needs sensitivity >= 1 and eps > 0, got {sensitivity}, {epsilon}")
    s = 1 << den_bits
    t = math.ceil(Fraction(sensitivity * s) / Fraction(epsilon))
    return int(t), s


def discrete_laplace_variance(scale_num: int, scale_den: int) -> float:
    """Var of ``discrete_laplace(t, s)``: 2 q / (1 - q)^2 with q = exp(-s / t)."""
    q = math.exp(-scale_den / scale_num)
    return 2 * q / (1 - q) ** 2


# ``discrete_gaussian`` keeps (|Y| t - S)^2 < 2^63: S <= 2^20 and T t < 2^31.
MAX_GAUSSIAN_SIGMA_SQ = 1 << 20


def discrete_gaussian(sigma_sq: int, clip: int, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``size`` integers with P(z) proportional to exp(-z^2 / (2 S)) on |z| <= T.

    CKS Alg. 3 with S = ``sigma_sq`` an integer and t = floor(sqrt(S)) + 1:
    propose Y ~ discrete Laplace of scale t, accept with Bernoulli(exp(-g)),
    g = (|Y| - S / t)^2 / (2 S) = (|Y| t - S)^2 / (2 S t^2), an exact
    rational. exp(-g) = exp(-1)^floor(g) exp(-frac(g)): V geometric with
    ratio 1/e has P(V >= q) = e^-q, so accept iff V >= floor(g) and
    Bernoulli(exp(-frac(g))). Proposals with |Y| > T are rejected, which
    makes the output exactly the discrete Gaussian conditioned on |z| <= T
    (the caller accounts P(|z| > T) in its delta, as ``secure_sum`` does for
    its clip)."""
    s, t_clip = int(sigma_sq), int(clip)
    if not 1 <= s <= MAX_GAUSSIAN_SIGMA_SQ:
        raise ConfigError(f"discrete Gaussian variance parameter must be an integer in [1, 2^20], got {sigma_sq}")
    t = math.isqrt(s) + 1
    if not 1 <= t_clip or t_clip * t >= 1 << 31:
        raise ConfigError(f"discrete Gaussian clip must be in [1, 2^31 / {t}), got {clip}")
    out = np.empty(size, dtype=np.int64)
    den = 2 * s * t * t
    done = 0
    while done < size:
        m = size - done
        y = discrete_laplace(t, 1, oversampled(m), rng)
        y = y[np.abs(y) <= t_clip]
        u = np.abs(y) * t - s
        q, r = np.divmod(u * u, den)
        z = y[bernoulli_exp_neg_mixed(q, r, den, rng)][:m]
        out[done:done + z.size] = z
        done += z.size
    return out


def discrete_gaussian_tail(sigma_sq: int, clip: int) -> float:
    """An upper bound on P(Z > T) for the untruncated discrete Gaussian:
    the normaliser sum_z e^{-z^2 / 2S} is at least max(1, sqrt(2 pi S) - 1)
    (a unimodal function's sum is at least its integral minus its maximum),
    and sum_{z > T} e^{-z^2 / 2S} <= e^{-(T+1)^2 / 2S} / (1 - e^{-(T+1) / S})
    (a geometric series: z^2 >= (T+1)^2 + 2 (T+1)(z - T - 1))."""
    m = clip + 1
    norm = max(1.0, math.sqrt(2 * math.pi * sigma_sq) - 1)
    return math.exp(-m * m / (2 * sigma_sq)) / -math.expm1(-m / sigma_sq) / norm
