"""Multi-message secure summation with distributed discrete Laplace noise.

The split-and-mix protocol of Ishai, Kushilevitz, Ostrovsky, Sahai (FOCS'06,
"Cryptography from anonymity"), used for differentially private sums in the
shuffle model as in Balle, Bell, Gascon, Nissim (CCS'20, "Private summation
in the multi-message shuffle model") and seed 004 (Thm. 2, Appendix C):

1. Fixed point. A device's real vector v (|v_i| <= ``max_abs``,
   ||v||_1 <= ``l1_norm``, at most ``max_nonzero`` non-zero entries) becomes
   integers by unbiased stochastic rounding of ``scale`` * v.
2. Distributed noise (``distributed_noise.py``), one of two laws:
   ``laplace``: each device adds, per coordinate, Z = X - Y with X, Y
   independent Polya / negative-binomial NB(1/n_min, 1 - alpha) draws. Sums
   of NB are NB with the shape parameters added, so n_min devices together
   add NB(1, .) - NB(1, .) = Geometric - Geometric: exactly the discrete
   Laplace distribution P(z) proportional to alpha^|z| (Goryczka & Xiong;
   Balcer et al.). With alpha = exp(-s / t), s / t <= eps / Delta_1 a
   rational (``laplace_scale``), Delta_1 the L1 sensitivity of one device's
   integer vector, the noisy total is eps-DP (geometric mechanism,
   Ghosh-Roughgarden-Sundararajan). More devices than n_min only add
   independent noise (post-processing). The Polya draws are exact
   (``distributed_noise.polya``: the points j <= T of their compound
   Poisson process, every decision an integer comparison); they equal the
   untruncated draws except on the clip event below.
   ``gaussian``: each device adds an exact discrete Gaussian N_Z(0, S);
   the total is rho-zCDP for the integer L2 sensitivity Delta_2 (Kairouz,
   Liu, Steinke ICML'21), hence (eps, delta_g)-DP with delta_g = delta / 2
   by Canonne, Kamath, Steinke's conversion (NeurIPS'20, Cor. 13;
   ``distributed_noise.rho_for_tight``), which allows about 1.4 x the rho
   of Bun-Steinke's (about 16% less noise sd) at the same (eps, delta).
   ``derive(noise="auto")`` takes the law with the smaller noise.
3. Clipping. Each device clips its Z to [-T, T] so every value it can send
   is bounded (this is what makes overflow impossible, below). The clipped
   protocol differs from the exact one on an event of probability at most
   tau = n_max * L * 2 * P(Z > T) (laplace: NB(r) with r <= 1 is
   stochastically below NB(1) = Geometric, so P(X > T) <= alpha^(T+1);
   gaussian: ``exact_sampling.discrete_gaussian_tail``).
4. Split and mix. The device's vector w in Z_q^(L+1) (the L noisy
   coordinates and one check coordinate equal to 1, without noise) is split
   into ``shares`` uniformly random additive shares mod q = 2^bits, each sent
   as its own sealed message; the shuffler mixes all shares of all devices,
   and the server adds everything mod q.

Privacy (replacement neighbours, honest devices, a shuffler that does not
collude with the server): if the shuffled multiset of shares is
2^-sigma-close to a function of the noisy total alone (IKOS security), the
server's view is (eps, delta)-DP with delta = delta_g + (1 + e^eps)(tau + 2^-sigma):
P[view(D) in S] <= P[ideal(D) in S] + tau + 2^-sigma
<= e^eps P[ideal(D') in S] + delta_g + tau + 2^-sigma
<= e^eps P[view(D') in S] + delta_g + (1 + e^eps)(tau + 2^-sigma).
``derive`` spends half of delta on each of the last two terms for the
laplace law (delta_g = 0), and delta / 2, / 4, / 4 for the gaussian law.

No overflow, by construction. Every device's noisy integer value lies in
[-(A + T), A + T] with A = ceil(scale * max_abs) (rounding never leaves
[-A, A]; the encoder clips there too, so this holds for any input), and
the server refuses to decode more than n_max devices. So the true integer
total S satisfies |S| <= n_max (A + T) < q / 2 (the rule below picks the
smallest power of two q = 2^bits with q > 2 n_max (A + T) + 2), and the
centered representative of (sum of shares mod q) in (-q/2, q/2] *is* S:
two integers in (-q/2, q/2] that agree mod q are equal. The check
coordinate's total is the number of devices m <= n_max < q/2, likewise
exact. ``tests/common/mechanisms/test_secure_sum.py`` drives the boundary
+-n_max (A + T) through the modular sum.

Missing shares. The check coordinate of every device sums to 1 over its
shares and carries no noise. If any share is missing (or one too many
arrives), the affected device's check contributions no longer sum to 1;
their sum is then uniform mod q and equals the expected count with
probability 2^-bits; the count of messages must also be a multiple of
``shares``. ``decode_total`` checks both and raises ``SecureSumError``:
a round fails loudly instead of returning garbage.

The number of shares s. Statistical security 2^-sigma of split-and-mix
needs s = O(1 + (sigma + log q) / log n) messages per device (Balle, Bell,
Gascon, Nissim, "Improved summation from shuffling", 2019; Ghazi,
Manurangsi, Pagh, Velingker, EUROCRYPT'20). We could not check those
papers' exact constants offline; the rule
s = ceil((2 sigma + bits) / log2(n_min / e)) + 2 has that dependence and
reproduces their published operating point (n = 1e4 parties, 32-bit
values, sigma = 40 -> 12 messages). sigma is the smallest integer with
(1 + e^eps) 2^-sigma <= delta / 2, and at least 40.

Everything is vectorised over devices; the arithmetic mod q = 2^bits runs
in uint64 with natural wrap-around (2^bits divides 2^64). Pure math, no I/O.
Over 300 lines: parameters (with both noise laws' calibration), encoding,
noise shares and decoding of one protocol, whose modular arithmetic and
delta accounting must be read together; the laws themselves live in
``distributed_noise.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError, DecodeError
from shoal.common.mechanisms.distributed_noise import (
    MIN_GAUSSIAN_SIGMA_SQ,
    NOISES,
    gaussian_clip,
    gaussian_rho,
    gaussian_shares,
    gaussian_sigma_sq,
    laplace_shares,
    rho_for_tight,
    zcdp_delta_tight,
)
from shoal.common.mechanisms.exact_sampling import (
    MAX_GAUSSIAN_SIGMA_SQ,
    discrete_gaussian_tail,
    laplace_scale_fraction,
)

MAX_BITS = 62
MIN_SIGMA = 40


class SecureSumError(DecodeError):
    """The shares do not add up to a valid total (missing, extra or forged shares)."""


@dataclass(frozen=True)
class SumLaw:
    """How a round's secure sum is calibrated beyond its (eps, delta): the noise law
    ("auto": the one with the smaller noise) and the eps at which its failure
    probability is charged (``SecureSumParams.derive``'s ``failure_epsilon``; None:
    its own). A plan that composes several sums in zCDP asks for the gaussian law
    at the total's eps (``kinds.partition_plan``)."""

    noise: str = "auto"
    failure_epsilon: float | None = None

    def __post_init__(self) -> None:
        if self.noise not in NOISES + ("auto",):
            raise ConfigError(f"secure sum noise must be one of {NOISES + ('auto',)}, got {self.noise!r}")
        if self.failure_epsilon is not None and not (math.isfinite(self.failure_epsilon) and self.failure_epsilon > 0):
            raise ConfigError(f"failure_epsilon must be finite and > 0, got {self.failure_epsilon}")


DEFAULT_LAW = SumLaw()  # the smaller noise at the round's own (eps, delta)


@dataclass(frozen=True)
class SecureSumParams:
    """Public parameters of one secure sum; every inequality of the module
    docstring is re-checked on construction, so a published set cannot lie."""

    length: int
    l1_norm: float
    max_abs: float
    max_nonzero: int
    epsilon: float
    delta: float
    min_devices: int
    max_devices: int
    scale: int
    bits: int
    shares: int
    noise_clip: int
    sigma: int
    noise: str = "laplace"
    l2_norm: float = 0.0
    sigma_sq: int = 0
    aligned: bool = False

    def __post_init__(self) -> None:
        if self.noise not in NOISES:
            raise ConfigError(f"secure sum noise must be one of {NOISES}, got {self.noise!r}")
        if self.noise == "gaussian":
            if not (math.isfinite(self.l2_norm) and self.l2_norm > 0):
                raise ConfigError(f"gaussian secure sum needs a finite l2_norm > 0, got {self.l2_norm}")
            if not (isinstance(self.sigma_sq, int) and MIN_GAUSSIAN_SIGMA_SQ <= self.sigma_sq <= MAX_GAUSSIAN_SIGMA_SQ):
                raise ConfigError(f"gaussian secure sum needs an integer sigma_sq in [16, 2^20], got {self.sigma_sq}")
        elif self.sigma_sq:
            raise ConfigError(f"sigma_sq belongs to the gaussian noise, got {self.sigma_sq} with laplace")
        if self.length < 1:
            raise ConfigError(f"secure sum length must be >= 1, got {self.length}")
        for name in ("l1_norm", "max_abs", "epsilon"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"secure sum {name} must be finite and > 0, got {v}")
        if not 1 <= self.max_nonzero <= self.length:
            raise ConfigError(f"secure sum max_nonzero must be in [1, {self.length}], got {self.max_nonzero}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"secure sum delta must be in (0, 1), got {self.delta}")
        if self.min_devices < 16:
            raise ConfigError(f"secure sum needs min_devices >= 16, got {self.min_devices}")
        if self.max_devices < self.min_devices:
            raise ConfigError(f"max_devices {self.max_devices} < min_devices {self.min_devices}")
        if self.scale < 1:
            raise ConfigError(f"secure sum scale must be >= 1, got {self.scale}")
        if not 2 <= self.bits <= MAX_BITS:
            raise ConfigError(f"secure sum bits must be in [2, {MAX_BITS}], got {self.bits}")
        if self.noise_clip < 0:
            raise ConfigError(f"noise_clip must be >= 0, got {self.noise_clip}")
        if 2 * self.max_devices * (self.max_value + self.noise_clip) + 2 >= self.modulus:
            raise ConfigError(
                f"q = 2^{self.bits} is too small: totals reach +-{self.max_devices * (self.max_value + self.noise_clip)}"
            )
        if self.shares < 2:
            raise ConfigError(f"secure sum needs >= 2 shares, got {self.shares}")
        if self.sigma < MIN_SIGMA or self.shares < shares_rule(self.sigma, self.bits, self.min_devices):
            raise ConfigError(
                f"{self.shares} shares give less than 2^-{MIN_SIGMA} security for n_min={self.min_devices}, "
                f"q=2^{self.bits}, sigma={self.sigma}"
            )
        if self.delta_used > self.delta * (1 + 1e-9):
            raise ConfigError(
                f"clip {self.noise_clip} and sigma {self.sigma} spend delta {self.delta_used:.3g} > {self.delta}"
            )

    @property
    def modulus(self) -> int:
        return 1 << self.bits

    @property
    def max_value(self) -> int:
        """A = ceil(scale * max_abs): no device's rounded coordinate exceeds it."""
        return math.ceil(self.scale * self.max_abs)

    @property
    def max_l1(self) -> int:
        """No device's rounded integer vector has a larger L1 norm: each non-zero
        entry rounds up by less than 1, so sum ceil(scale |v_i|) <= floor(scale l1) + nnz."""
        return math.floor(self.scale * self.l1_norm) + self.max_nonzero

    @property
    def sensitivity(self) -> int:
        """L1 distance between two devices' integer vectors (replacement)."""
        return 2 * self.max_l1

    @property
    def laplace_scale(self) -> tuple[int, int]:
        """(t, s) with s / t <= epsilon / sensitivity (``exact_sampling.laplace_scale_fraction``):
        the laplace law's total is discrete Laplace with alpha = exp(-s / t), an
        exact rational exponent the Polya shares are drawn with, and is
        (sensitivity s / t)-DP, at most epsilon."""
        return laplace_scale_fraction(self.sensitivity, self.epsilon)

    @property
    def alpha(self) -> float:
        """Discrete Laplace parameter of the total noise: P(z) ~ alpha^|z|,
        alpha = exp(-s / t) <= exp(-epsilon / sensitivity)."""
        t, s = self.laplace_scale
        return math.exp(-s / t)

    @property
    def l2_sensitivity(self) -> float:
        """L2 distance between two devices' integer vectors (replacement).
        Rounding moves each of a vector's non-zero entries by less than 1,
        so |int(a) - int(b)| <= scale |a - b| + 2 sqrt(non-zeros), and
        |a - b| <= 2 l2_norm; ``aligned`` vectors (any two have a
        non-negative inner product, as refine's buckets with their count 1
        do) have |a - b|^2 = |a|^2 + |b|^2 - 2 a.b <= 2 l2_norm^2."""
        spread = math.sqrt(2) if self.aligned else 2.0
        return spread * self.scale * self.l2_norm + 2 * math.sqrt(self.max_nonzero)

    @property
    def rho(self) -> float:
        """zCDP of the gaussian law's total (``distributed_noise.gaussian_rho``)."""
        return gaussian_rho(self.l2_sensitivity, self.sigma_sq, self.length, self.min_devices, self.max_devices)

    @property
    def failure(self) -> float:
        """The probability that the protocol's view differs from its ideal mechanism's (a
        clipped noise draw, tau, or split-and-mix's statistical distance, 2^-sigma): what
        ``delta_used`` charges (1 + e^eps) times, and what a zCDP composition of several
        sums adds up (``privacy.zcdp.composed_epsilon``)."""
        if self.noise == "gaussian":
            tail = discrete_gaussian_tail(self.sigma_sq, self.noise_clip)
        else:
            tail = self.alpha ** (self.noise_clip + 1)
        tau = self.max_devices * self.length * 2 * tail
        return tau + 2.0**-self.sigma

    @property
    def delta_used(self) -> float:
        mech = zcdp_delta_tight(self.rho, self.epsilon) if self.noise == "gaussian" else 0.0
        return mech + (1 + math.exp(self.epsilon)) * self.failure

    @property
    def noise_std(self) -> float:
        """Standard deviation of one coordinate's total noise over min_devices
        devices, in real units (a discrete Gaussian's variance is below S)."""
        if self.noise == "gaussian":
            return math.sqrt(self.min_devices * self.sigma_sq) / self.scale
        a = self.alpha
        return math.sqrt(2 * a) / (1 - a) / self.scale

    @classmethod
    def derive(
        cls,
        length: int,
        *,
        l1_norm: float,
        max_abs: float,
        max_nonzero: int,
        epsilon: float,
        delta: float,
        min_devices: int,
        max_devices: int | None = None,
        scale: int = 1 << 16,
        noise: str = "laplace",
        l2_norm: float | None = None,
        aligned: bool = False,
        failure_epsilon: float | None = None,
    ) -> SecureSumParams:
        """The documented rule (module docstring): sigma, T, q = 2^bits, s.
        ``noise="auto"`` (needs ``l2_norm``) derives both laws and keeps the
        one with the smaller noise_std. ``failure_epsilon`` > epsilon: sigma and T
        are sized so (1 + e^failure_epsilon) x the failure stays within the same
        share of delta (a sum composed in zCDP with others into a total of that
        eps, ``privacy.zcdp.composed_epsilon``); the round's own delta only gains."""
        if max_devices is None:
            max_devices = 100 * min_devices
        if not (math.isfinite(epsilon) and epsilon > 0) or not 0 < delta < 1:
            raise ConfigError(f"secure sum needs eps > 0 and delta in (0, 1), got eps={epsilon}, delta={delta}")
        if scale < 1:
            raise ConfigError(f"secure sum scale must be >= 1, got {scale}")
        if failure_epsilon is not None and not (math.isfinite(failure_epsilon) and failure_epsilon >= epsilon):
            raise ConfigError(f"secure sum failure_epsilon must be finite and >= epsilon ({epsilon}), got {failure_epsilon}")
        args = dict(l1_norm=l1_norm, max_abs=max_abs, max_nonzero=max_nonzero, epsilon=epsilon, delta=delta,
                    min_devices=min_devices, max_devices=max_devices, scale=scale, failure_epsilon=failure_epsilon)
        if noise == "auto":
            if l2_norm is None:
                raise ConfigError("noise='auto' needs the vectors' l2_norm")
            lap = cls.derive(length, noise="laplace", **args)  # type: ignore[arg-type]
            try:
                gau = cls.derive(length, noise="gaussian", l2_norm=l2_norm, aligned=aligned, **args)  # type: ignore[arg-type]
            except ConfigError:
                return lap
            return gau if gau.noise_std < lap.noise_std else lap
        if noise == "gaussian":
            if l2_norm is None:
                raise ConfigError("gaussian noise needs the vectors' l2_norm")
            return cls._derive_gaussian(length, l2_norm=l2_norm, aligned=aligned, **args)  # type: ignore[arg-type]
        if noise != "laplace":
            raise ConfigError(f"secure sum noise must be one of {NOISES + ('auto',)}, got {noise!r}")
        growth = 1 + math.exp(max(epsilon, failure_epsilon or epsilon))
        sigma = max(MIN_SIGMA, math.ceil(math.log2(2 * growth / delta)))
        sens = 2 * (math.floor(scale * l1_norm) + max_nonzero)
        log_alpha = -epsilon / sens
        # smallest T with growth * n_max * L * 2 * alpha^(T+1) <= delta / 2
        clip = max(0, math.ceil(math.log(delta / (4 * growth * max_devices * length)) / log_alpha) - 1)
        top = max_devices * (math.ceil(scale * max_abs) + clip)
        bits = max(2, (2 * top + 2).bit_length())
        if bits > MAX_BITS:
            raise ConfigError(
                f"totals up to +-{top} need q = 2^{bits} > 2^{MAX_BITS}: lower the scale ({scale}) or max_devices ({max_devices})"
            )
        return cls(
            length=length, l1_norm=float(l1_norm), max_abs=float(max_abs), max_nonzero=max_nonzero,
            epsilon=float(epsilon), delta=float(delta), min_devices=min_devices, max_devices=max_devices,
            scale=scale, bits=bits, shares=shares_rule(sigma, bits, min_devices), noise_clip=clip, sigma=sigma,
        )

    @classmethod
    def _derive_gaussian(
        cls, length: int, *, l1_norm: float, max_abs: float, max_nonzero: int, epsilon: float, delta: float,
        min_devices: int, max_devices: int | None, scale: int, l2_norm: float, aligned: bool,
        failure_epsilon: float | None = None,
    ) -> SecureSumParams:
        """Gaussian law (arguments checked by ``derive``): rho from (eps,
        delta / 2); the largest power-of-two scale <= ``scale`` whose S fits
        the exact sampler (2^20); T for delta / 4; sigma for delta / 4."""
        assert max_devices is not None
        growth = 1 + math.exp(max(epsilon, failure_epsilon or epsilon))
        sigma = max(MIN_SIGMA, math.ceil(math.log2(4 * growth / delta)))
        rho = rho_for_tight(epsilon, delta / 2)
        scale = 1 << (int(scale).bit_length() - 1)
        while True:
            sens = (math.sqrt(2) if aligned else 2.0) * scale * l2_norm + 2 * math.sqrt(max_nonzero)
            try:
                s_sq = gaussian_sigma_sq(sens, rho, length, min_devices, max_devices)
                break
            except ConfigError:
                if scale == 1:
                    raise
                scale //= 2
        clip = gaussian_clip(s_sq, delta / (8 * growth * max_devices * length))
        top = max_devices * (math.ceil(scale * max_abs) + clip)
        bits = max(2, (2 * top + 2).bit_length())
        if bits > MAX_BITS:
            raise ConfigError(f"totals up to +-{top} need q = 2^{bits} > 2^{MAX_BITS}: lower max_devices ({max_devices})")
        return cls(
            length=length, l1_norm=float(l1_norm), max_abs=float(max_abs), max_nonzero=max_nonzero,
            epsilon=float(epsilon), delta=float(delta), min_devices=min_devices, max_devices=max_devices,
            scale=scale, bits=bits, shares=shares_rule(sigma, bits, min_devices), noise_clip=clip, sigma=sigma,
            noise="gaussian", l2_norm=float(l2_norm), sigma_sq=s_sq, aligned=bool(aligned),
        )


def shares_rule(sigma: int, bits: int, min_devices: int) -> int:
    """s = ceil((2 sigma + log2 q) / log2(n_min / e)) + 2 (module docstring)."""
    return math.ceil((2 * sigma + bits) / math.log2(min_devices / math.e)) + 2


def fixed_point(values: NDArray[np.float64], params: SecureSumParams, rng: np.random.Generator) -> NDArray[np.int64]:
    """Unbiased stochastic rounding of scale * v, clipped to [-A, A]; raises if a
    device's vector breaks the public L1 or non-zero bounds."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != params.length:
        raise ConfigError(f"secure sum vectors must have shape (n, {params.length}), got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ConfigError("secure sum vectors contain NaN or infinite values")
    y = v * params.scale
    low = np.floor(y)
    ints = (low + (rng.random(y.shape) < (y - low))).astype(np.int64)
    ints = np.clip(ints, -params.max_value, params.max_value)
    l1 = np.abs(ints).sum(axis=1)
    # Non-zeros of the input, not of the rounded vector: the bounds that use
    # max_nonzero (max_l1, l2_sensitivity) charge each non-zero *input* entry
    # a rounding error below 1, and an entry that happens to round to 0 still
    # had that error (scale |v_i|); counting after rounding let a vector with
    # more non-zeros through whenever the extras rounded to 0.
    nnz = np.count_nonzero(v, axis=1)
    if np.any(l1 > params.max_l1) or np.any(nnz > params.max_nonzero):
        raise ConfigError(
            f"a vector exceeds the public bounds (L1 <= {params.l1_norm}, <= {params.max_nonzero} non-zeros)"
        )
    if params.noise == "gaussian" and np.any(np.sqrt((v * v).sum(axis=1)) > params.l2_norm):
        raise ConfigError(f"a vector exceeds the public bounds (L2 <= {params.l2_norm})")
    return ints


def noise_shares(n: int, params: SecureSumParams, rng: np.random.Generator) -> NDArray[np.int64]:
    """Each device's share of the noise, (n, length), within [-T, T]."""
    shape = (n, params.length)
    if params.noise == "gaussian":
        return gaussian_shares(shape, params.sigma_sq, params.noise_clip, rng)
    return laplace_shares(shape, params.min_devices, params.laplace_scale, params.noise_clip, rng)


def encode_devices(
    values: NDArray[np.float64], params: SecureSumParams, rng: np.random.Generator
) -> NDArray[np.uint64]:
    """What n devices send: (n, shares, length + 1) uint64 shares mod q.

    Shares 1..s-1 are uniform in Z_q; the last makes the sum equal the
    device's noisy fixed-point vector with the check coordinate 1 appended."""
    ints = fixed_point(values, params, rng) + noise_shares(values.shape[0], params, rng)
    return split(ints, params, rng)


def split(ints: NDArray[np.int64], params: SecureSumParams, rng: np.random.Generator) -> NDArray[np.uint64]:
    """Additive shares mod q of each row of ``ints`` with the check coordinate 1 appended."""
    n = ints.shape[0]
    mask = np.uint64(params.modulus - 1)
    w = np.concatenate([ints, np.ones((n, 1), dtype=np.int64)], axis=1).astype(np.uint64)  # two's complement = mod 2^64
    out = rng.integers(0, params.modulus, size=(n, params.shares, params.length + 1), dtype=np.uint64)
    out[:, -1] = (w - out[:, :-1].sum(axis=1, dtype=np.uint64)) & mask
    return out


def add_shares(shares: NDArray[np.uint64], params: SecureSumParams) -> NDArray[np.uint64]:
    """The server's only operation on shares: their sum mod q (any order, any grouping)."""
    flat = shares.reshape(-1, params.length + 1)
    return flat.sum(axis=0, dtype=np.uint64) & np.uint64(params.modulus - 1)


def decode_total(total: NDArray[np.uint64], messages: int, params: SecureSumParams) -> tuple[NDArray[np.float64], int]:
    """The noisy real-valued sum and the number of devices, from the modular
    total of ``messages`` shares; raises ``SecureSumError`` if shares are
    missing or extra, or the device count is outside [min, max]."""
    if total.shape != (params.length + 1,):
        raise SecureSumError(f"total has shape {total.shape}, expected ({params.length + 1},)")
    if messages % params.shares:
        raise SecureSumError(
            f"{messages} shares is not a multiple of {params.shares}: some device's shares are missing or repeated"
        )
    devices = messages // params.shares
    q = params.modulus
    centered = total.astype(np.int64)
    centered = np.where(centered >= q // 2, centered - q, centered)
    if int(centered[-1]) != devices:
        raise SecureSumError(
            f"check coordinate sums to {int(centered[-1])}, expected {devices} devices: shares are missing or corrupt"
        )
    if not params.min_devices <= devices <= params.max_devices:
        raise SecureSumError(
            f"{devices} devices outside [{params.min_devices}, {params.max_devices}]: the noise or the overflow bound would not hold"
        )
    return centered[:-1].astype(np.float64) / params.scale, devices
