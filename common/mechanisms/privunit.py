"""PrivUnit on a public random codebook: an eps-LDP vector randomiser whose
emitted bits are eps-DP, not only its real-arithmetic idealisation.

PrivUnit_2 (Bhowmick, Duchi, Freudiger, Kapoor, Rogers 2018, Alg. 1) outputs
a direction uniform on the cap {<V,u> >= gamma} with probability p and on its
complement otherwise. Computed in floating point it leaks: the cap draw
``betaincinv`` of a 2^-53-grid uniform, and the component along u of an
axis-aligned input, land on doubles only the true input reproduces (shoal
0.1's audit: claimed vector eps 3, measured >= 5.5). Following Feldman and
Talwar ("Lossless compression of efficient private local randomizers",
ICML'21), the device instead picks one of N public candidate directions
and sends only its index:

1. It draws a nonce (64 bits, uniform, data-independent) and derives N
   candidate unit vectors V_0..V_{N-1} from (round key, nonce, index)
   (``privunit_codebook``: fresh from a counter-based hash below d = 16, a
   round's shared codebook under a per-nonce signed permutation from d = 16;
   the server regenerates any one of them).
2. The cap C(u) is the K candidates with the largest <V_i, u> (ties broken by
   index): a deterministic set of exactly K indices, whatever u is.
3. With probability p_c = A / 2^32 (``exact_sampling.bernoulli_dyadic``) it
   sends an index uniform on C(u), otherwise one uniform on the other N - K
   (``Generator.integers``: exact uniform integers).

Privacy, on the wire. Given the nonce, every index has probability
p_c / K (in the cap) or (1 - p_c) / (N - K) (outside), for *every* input u.
So for any inputs u, u' and any sent (nonce, J),
    P(J | u) / P(J | u') <= (p_c / K) / ((1 - p_c) / (N - K))
                          = A (N - K) / (K (2^32 - A)),
an exact rational checked against e^eps when the parameters are built
(``log_ratio_upper``). Floating point enters only through C(u), which is a
deterministic function of u: any such function keeps the bound. Inputs in
the ball are first rounded to +-x/|x| with P(+) = (1 + |x|)/2; every
output's probability lies in [(1-p_c)/(N-K), p_c/K] for every sphere point,
so the mixture does too.

Decoding. The candidates are i.i.d. uniform on the sphere given the nonce
(fresh form; the shared form is unbiased over the round's seed and within
0.2% of it for one codebook, ``privunit_codebook``), so by symmetry
E[V_J | u] = c u with c = mu_K (p_c / K - (1 - p_c)/(N - K)),
mu_K = E[sum of the K largest of N i.i.d. <V, u>] (t = 2 Beta(a, a) - 1,
a = (d-1)/2; a 1-D integral, ``_top_sum``). The server outputs V_J / c:
unbiased, norm 1/c. As N grows with K / N fixed this is PrivUnit with its
cap share sigma = K / N; at N = 1024 (4096 above eps 4.5) and the best K
(searched in steps of 2^(1/8)), E||Z||^2 is within 0.6% of continuous
PrivUnit's for d in {2, 10, 16, 100} and eps in [0.5, 7.5] (computed;
``tests/common/mechanisms/test_privunit.py``).

Wire: 8 bytes of nonce and a 2-byte index instead of d floats.
``sample_decoded`` draws V_J / c directly from its distribution (order
statistics; for simulations and benchmarks only, never for a device).

Over 300 lines because the exact cap sampler, its calibration and the
codebook wire form must agree bit for bit; they are one mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.exact_sampling import (
    DYADIC_ONE,
    bernoulli_dyadic,
    dyadic_below,
    log_ratio_upper,
)
from shoal.common.mechanisms.privunit_codebook import candidates, scores, shared
from shoal.common.privacy.events import PrivUnitEvent

MAX_CANDIDATES = 1 << 16
CHUNK_ELEMENTS = 1 << 22  # devices x candidates x dim per vectorised block (32 MB of float64)


def default_candidates(epsilon: float) -> int:
    """N: 1024 up to eps 4.5, 4096 above (module docstring: variance within 0.6%)."""
    return 1024 if epsilon <= 4.5 else 4096


@dataclass(frozen=True)
class PrivUnitParams:
    """A codebook PrivUnit randomiser: dim, eps, N candidates, cap K, P(cap) = A / 2^32."""

    dim: int
    epsilon: float
    candidates: int
    cap: int
    cap_numerator: int

    def __post_init__(self) -> None:
        if self.dim < 2:
            raise ConfigError(f"PrivUnit needs dim >= 2, got {self.dim}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"PrivUnit epsilon must be finite and > 0, got {self.epsilon}")
        if not 2 <= self.candidates <= MAX_CANDIDATES:
            raise ConfigError(f"PrivUnit candidates N must be in [2, {MAX_CANDIDATES}], got {self.candidates}")
        if not 1 <= self.cap < self.candidates:
            raise ConfigError(f"PrivUnit cap K must be in [1, N-1={self.candidates - 1}], got {self.cap}")
        if not 0 < self.cap_numerator < DYADIC_ONE:
            raise ConfigError(f"PrivUnit cap numerator must be in (0, 2^32), got {self.cap_numerator}")
        num, den = self.ratio
        if num < den:
            raise ConfigError(
                f"PrivUnit cap (K={self.cap}, A={self.cap_numerator}) is less likely per index than its complement"
            )
        if log_ratio_upper(num, den) > self.epsilon:
            raise ConfigError(
                f"PrivUnit (N={self.candidates}, K={self.cap}, A={self.cap_numerator}) has likelihood ratio "
                f"{num}/{den} = e^{math.log(num / den):.9f} > e^{self.epsilon}"
            )

    @property
    def ratio(self) -> tuple[int, int]:
        """The exact worst-case likelihood ratio as integers: A (N - K) / (K (2^32 - A))."""
        a, n, k = self.cap_numerator, self.candidates, self.cap
        return a * (n - k), k * (DYADIC_ONE - a)

    @property
    def cap_probability(self) -> float:
        return self.cap_numerator / DYADIC_ONE

    @property
    def scale(self) -> float:
        """c = E<V_J, u>; the decoder divides by it."""
        return _scale(self.dim, self.candidates, self.cap, self.cap_numerator)

    @property
    def expected_sq_norm(self) -> float:
        """E||Z||^2 = 1 / c^2 (exact: every decoded output has this norm)."""
        return 1.0 / self.scale**2

    @property
    def event(self) -> PrivUnitEvent:
        return PrivUnitEvent(
            epsilon=self.epsilon, dim=self.dim, candidates=self.candidates, cap=self.cap,
            cap_numerator=self.cap_numerator, denominator=DYADIC_ONE,
        )

    @classmethod
    def calibrate(cls, dim: int, epsilon: float, candidates: int | None = None, cap: int | None = None) -> PrivUnitParams:
        """The (K, A) with ratio <= e^eps that minimise E||Z||^2 for N candidates
        (``default_candidates`` unless given); K as given when published in a config."""
        n = int(candidates) if candidates is not None else default_candidates(float(epsilon))
        k = int(cap) if cap is not None else _best_cap(int(dim), float(epsilon), n)
        return cls(dim=int(dim), epsilon=float(epsilon), candidates=n, cap=k,
                   cap_numerator=_cap_numerator(float(epsilon), n, k))


@lru_cache(maxsize=1024)
def _cap_numerator(epsilon: float, n: int, k: int) -> int:
    """The largest A whose exact ratio A (N-K) / (K (2^32 - A)) stays <= e^eps."""
    e = math.exp(epsilon)
    a = dyadic_below(k * e / (k * e + n - k))
    a = min(a, DYADIC_ONE - 1)
    while a > 0 and log_ratio_upper(a * (n - k), k * (DYADIC_ONE - a)) > epsilon:
        a -= 1 + a // 10**9  # steps of ~1e-9 relative: a few at most
    if a <= 0:
        raise ConfigError(f"no cap probability meets eps={epsilon} for N={n}, K={k}")
    return a


@lru_cache(maxsize=64)
def _grid(dim: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Upper-tail probabilities s (log grid) and t(s) = 2 F^-1(1 - s) - 1."""
    # scipy is imported on first calibration, not with the device side (issue 16: import < 0.5 s).
    from scipy import special

    a = (dim - 1) / 2.0
    s = np.logspace(-16, 0, 8001)
    return s, 2 * special.betainccinv(a, a, s) - 1


@lru_cache(maxsize=1024)
def _top_sum(dim: int, n: int, k: int) -> float:
    """mu_K = E[sum of the K largest of N i.i.d. t]: N * int t(s) P(Bin(N-1, s) <= K-1) ds.

    The binomial cdf from ``scipy.special.bdtr``, not ``scipy.stats.binom``:
    importing scipy.stats cost 0.3-0.8 s of every first round's config (issue
    42); the two agree to 1e-10 and pick the same K (130 (dim, eps) pairs, the
    closest runner-up 7e-6 below the best). K only tunes utility: the cap
    probability meets eps exactly for whatever K (``_cap_numerator``)."""
    from scipy import special

    s, t = _grid(dim)
    w = special.bdtr(k - 1, n - 1, s)
    return float(n * np.trapezoid(t * w, s))


@lru_cache(maxsize=1024)
def _scale(dim: int, n: int, k: int, numerator: int) -> float:
    p = numerator / DYADIC_ONE
    return _top_sum(dim, n, k) * (p / k - (1 - p) / (n - k))


@lru_cache(maxsize=256)
def _best_cap(dim: int, epsilon: float, n: int) -> int:
    if dim < 2 or not (math.isfinite(epsilon) and epsilon > 0) or n < 2:
        raise ConfigError(f"cannot calibrate PrivUnit for dim={dim}, epsilon={epsilon}, N={n}")
    # K from N/2 down to 1 in steps of 2^(1/8) (steps of sqrt(2) cost up to 2% of variance at eps 0.5)
    caps = sorted({max(1, min(n - 1, round(n * 2.0 ** (-j / 8)))) for j in range(8, 8 * int(math.log2(n)) + 1)})
    best, best_k = -math.inf, 1
    for k in caps:
        c = _scale(dim, n, k, _cap_numerator(epsilon, n, k))
        if c > best:
            best, best_k = c, k
    return best_k


def cap_mask(scores: NDArray[np.float64], k: int) -> NDArray[np.bool_]:
    """C(u) as a mask over the last axis: the K largest scores, ties broken by
    lowest index (a deterministic function of the scores; O(N) per row). A
    NaN score counts as -inf, so the cap always holds exactly K indices."""
    scores = np.where(np.isnan(scores), -np.inf, scores)
    big = scores.shape[-1]
    kth = np.partition(scores, big - k, axis=-1)[..., big - k : big - k + 1]
    above = scores > kth
    ties = scores == kth
    room = k - above.sum(axis=-1, keepdims=True)
    return above | (ties & (np.cumsum(ties, axis=-1) <= room))


def _nth_true(mask: NDArray[np.bool_], nth: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per row, the index of the nth (0-based) True entry of ``mask``."""
    return np.argmax(mask & (np.cumsum(mask, axis=-1) == (nth[:, None] + 1)), axis=-1)


def round_to_sphere(x: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
    """Unbiased randomised rounding of ball points to +-x/|x| (E = x); 0 -> +-e1.

    Not a privacy step: the randomiser is eps-DP for every pair of sphere
    points, so this coin's floating point changes only the bias (< 2^-53)."""
    norms = np.linalg.norm(x, axis=1)
    safe = np.where(norms > 0, norms, 1.0)
    u = x / safe[:, None]
    u[norms == 0] = 0.0
    u[norms == 0, 0] = 1.0
    return u * _rounding_signs(norms, rng)[:, None]


def _rounding_signs(norms: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
    """``round_to_sphere``'s coin: +1 with probability (1 + |x|) / 2, else -1 (one uniform a row)."""
    return np.where(rng.random(norms.shape[0]) < (1 + np.minimum(norms, 1.0)) / 2, 1.0, -1.0)


def _check_dim(x: NDArray[np.float64], params: PrivUnitParams) -> NDArray[np.float64]:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != params.dim:
        raise ConfigError(f"PrivUnit calibrated for dim {params.dim}, got points of shape {x.shape}")
    return x


def select(
    x: NDArray[np.float64], params: PrivUnitParams, key: int, rng: np.random.Generator
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """The device side for many devices: (nonce, index) per row of ``x`` (rows in the ball)."""
    x = _check_dim(x, params)
    u = round_to_sphere(x, rng)
    n, big, k = x.shape[0], params.candidates, params.cap
    nonces: NDArray[np.uint64] = np.asarray(rng.integers(0, 1 << 64, size=n, dtype=np.uint64))
    in_cap = bernoulli_dyadic(params.cap_numerator, n, rng)
    pick = np.where(in_cap, rng.integers(0, k, size=n), rng.integers(0, big - k, size=n))
    index = np.empty(n, dtype=np.int64)
    step = max(1, CHUNK_ELEMENTS // (big * (1 if shared(params.dim) else params.dim)))
    for lo in range(0, n, step):
        sl = slice(lo, min(n, lo + step))
        mask = cap_mask(scores(key, nonces[sl], u[sl, None, :], big)[:, 0, :], k)
        index[sl] = _nth_true(np.where(in_cap[sl, None], mask, ~mask), pick[sl])
    return nonces, index


def decode(
    nonces: NDArray[np.uint64], index: NDArray[np.int64], params: PrivUnitParams, key: int
) -> NDArray[np.float64]:
    """The server side: V_J / c for each report (unbiased for the device's ball point)."""
    out = np.empty((np.asarray(index).shape[0], params.dim))
    step = max(1, CHUNK_ELEMENTS // params.dim)
    for lo in range(0, out.shape[0], step):
        sl = slice(lo, lo + step)
        out[sl] = candidates(key, nonces[sl], index[sl], params.dim, params.candidates)
    return out / params.scale


def sample_decoded(x: NDArray[np.float64], params: PrivUnitParams, rng: np.random.Generator,
                   row_sign: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Draw decode(select(x)) from its distribution, without the codebook (simulation only).

    Given u, <V_J, u> is a uniform pick among the top K (with prob. p_c) or
    the other N - K of N i.i.d. t's, and the rest of V_J is uniform on the
    sphere orthogonal to u. In CDF space: Y = U_(N-K) ~ Beta(N-K, K+1); the
    top K are i.i.d. uniform on (Y, 1); the bottom N - K are Y itself and
    N - K - 1 i.i.d. uniform on (0, Y).

    ``row_sign`` (+-1 per row): sample for the rows x * row_sign without
    building them (the encoder's Hadamard signs), the same draws in the same
    order as ``round_to_sphere`` of those rows. The orthogonal part is
    g - <g, u> u for standard normals g, whose norm is sqrt(|g|^2 - <g, u>^2),
    so the output is a g + b u with per-row a, b: two reductions and three
    passes over one n x d buffer besides u (issue 42: this is half of a
    simulated encode; built through w it took five passes and two more
    buffers). Rows where that difference loses its digits (g nearly along u,
    possible only in very few dimensions) are projected explicitly."""
    x = _check_dim(x, params)
    n, big, k, a = x.shape[0], params.candidates, params.cap, params.dim / 2.0 - 0.5
    # round_to_sphere, its division and sign folded into one scale a row (and its draw in the same place)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    fair = _rounding_signs(norms, rng)
    in_cap = bernoulli_dyadic(params.cap_numerator, n, rng)
    y = rng.beta(big - k, k + 1, size=n)
    v = rng.random(n)
    at_y = rng.integers(0, big - k, size=n) == 0
    q = np.where(in_cap, y + v * (1 - y), np.where(at_y, y, v * y))
    from scipy import special

    t = 2 * special.betaincinv(a, a, q) - 1
    zero = norms == 0
    u = x * ((fair if row_sign is None else fair * row_sign) / np.where(zero, 1.0, norms))[:, None]
    if zero.any():  # 0 -> +-e1, as round_to_sphere
        u[zero] = 0.0
        u[zero, 0] = fair[zero]
    out = rng.standard_normal((n, params.dim))
    gu = np.einsum("ij,ij->i", out, u)
    gg = np.einsum("ij,ij->i", out, out)
    ww = gg - gu * gu
    close = np.flatnonzero(ww <= 1e-3 * gg)
    if close.size:
        w = out[close] - gu[close, None] * u[close]
        ww[close] = np.einsum("ij,ij->i", w, w)
    coef = np.sqrt(np.maximum(1 - t * t, 0.0)) / np.sqrt(ww) / params.scale
    out *= coef[:, None]
    u *= (t / params.scale - coef * gu)[:, None]
    out += u
    return out


def cap_members(
    nonces: NDArray[np.uint64], index: NDArray[np.int64], u: NDArray[np.float64], params: PrivUnitParams, key: int
) -> NDArray[np.bool_]:
    """Is each sent index in the cap C(u) of its nonce's codebook? ``u``: (n, d)
    unit rows, or (n, h, d) for h directions at once (then (n, h) answers).

    The replay an attacker runs on the exact wire values (and the audits
    run): the same candidates and the same floating-point cap as the device.
    By the module's argument P(member | u) = p_c for every u, whatever the
    floating point did."""
    single = u.ndim == 2
    dirs = u[:, None, :] if single else u
    n, big, k = index.shape[0], params.candidates, params.cap
    out = np.empty(dirs.shape[:2], dtype=bool)
    every = np.arange(big, dtype=np.int64)
    step = max(1, CHUNK_ELEMENTS // (big * (dirs.shape[1] if shared(params.dim) else params.dim)))
    for lo in range(0, n, step):
        sl = slice(lo, min(n, lo + step))
        sc = scores(key, nonces[sl], dirs[sl], big)
        mine = np.take_along_axis(sc, np.broadcast_to(index[sl, None, None], sc.shape[:2] + (1,)), axis=2)
        rank = (sc > mine).sum(axis=2) + ((sc == mine) & (every < index[sl, None, None])).sum(axis=2)
        out[sl] = rank < k
    return out[:, 0] if single else out
