"""Scrambled compressive sketches (seed 002: Schellekens et al., ICASSP'19).

A sketch is the mean of random Fourier features of the data,
z = (1/n) sum_i exp(i Omega^T x_i) / sqrt(m) in C^m (seed 002, Eq. 2), with a
public frequency matrix Omega (d x m) drawn from the round's seed.

Frequencies (``frequencies``). Directions uniform on the sphere, radii from
the "adapted radius" density p(R) ~ sqrt(R^2 + R^4 / 4) exp(-R^2 / 2) of
Keriven, Bourrier, Gribonval, Perez ("Sketching for large-scale learning of
mixture models", 2017, Sec. 3.3.2), divided by a bandwidth sigma. The
literature (and pycle's ``estimate_Sigma``) reads sigma off the data; we may
not. Instead each frequency gets its own bandwidth, log-uniform in
[``scale_low``, ``scale_high``] (a scale mixture of adapted-radius kernels,
still a characteristic kernel): the coarse frequencies make the decoder's
landscape smooth over the whole unit ball, the fine ones resolve clusters.
``default_scales`` derives the range from public quantities only
(d, k and the unit ball the public bound maps into); DESIGN.md: never from data.

Local mechanism (seed 002, Def. 3). A device with n0 records x_1..x_n0 (in
the unit ball) draws for each record a uniform mask b_i of r of the m
entries (alpha = r / m) and sends
    s = (1 / (alpha n0)) sum_i z_{x_i} (.) b_i + xi,
xi with independent real and imaginary parts ~ Laplace(b) (a complex
Laplace, Def. 2), plus n0 (public under the paper's replace-one neighbouring
relation, Sec. 3). E[s] = z_X (Def. 3, tested).

Privacy (Prop. 1, re-derived). Conditional on the masks, replacing one
record moves s by (z_x - z_x') (.) b_x / (alpha n0); over the 2m real
coordinates its L1 norm is at most r * 2 sqrt(2) / sqrt(m) / (alpha n0)
= 2 sqrt(2) sqrt(m) / n0 (each entry moves by |cos - cos'| + |sin - sin'|
<= 2 sqrt(2), over sqrt(m)). Laplace noise of scale b = 2 sqrt(2) sqrt(m)
/ (n0 eps) on every real coordinate is therefore eps-DP for every mask,
hence for their mixture (the proof's last step). In the paper's notation
b = sigma_xi / (2 sqrt(alpha m n0)), i.e. sigma_xi = 4 sqrt(2) sqrt(alpha) m
/ (sqrt(n0) eps). Proposition 1 as printed has alpha where sqrt(alpha)
belongs; the two agree at alpha = 1, and Eq. (7) (the SNR at eps-DP) uses
the sqrt(alpha) form. With the printed form and alpha < 1 the mechanism is
only eps / sqrt(alpha)-DP: ``tests/common/mechanisms/test_sketch.py`` audits both.

Exact noise (Mironov, CCS'12; shoal 0.1's real Laplace was audited at
eps >= 6.3 for a claimed 1). A device with n0 records rounds its 2m reals to
the public grid 2^e(n0) (``noise_grid``: e chosen so the rounding adds at
most 1% to the sensitivity) and adds discrete Laplace noise drawn exactly
(``exact_sampling.discrete_laplace``) in grid steps. On the grid, replacing
a record moves at most 2r rounded coordinates (the others are computed from
the same terms in the same order, so they are the same doubles), each by at
most |change| / 2^e + 1 steps; with a rigorous bound on floating-point
summation slack the integer L1 sensitivity is
    S = ceil((2 sqrt(2) sqrt(m) / n0 + 2r slack) / 2^e) + 2r,
and noise P(k) ~ exp(-|k| eps' / S) with eps' <= eps (the scale t / s is
rounded up) is eps-DP for the integers sent. Each sent real is k 2^e with
|k| < 2^53: exactly a double, and the server checks it is on the grid.

Global sketch (Def. 4 with unequal n0): the n0-weighted mean of device
sketches. Its SNR (Sec. 5, Eq. 6, generalised to unequal n0):
    SNR = ||z||^2 / sum_j Var(s_j),
    sum_j Var(s_j) = (1 - alpha ||z||^2) / (alpha N) + 2 m sum_l (n0_l b_l)^2 * 2 / N^2,
with N = sum_l n0_l (a real Laplace of scale b has variance 2 b^2, and
there are 2 m real coordinates). ``estimated_snr`` plugs in an unbiased
estimate of ||z||^2 from the noisy sketch itself (post-processing).

Pure numpy, no I/O; vectorised over records and devices (the mask loop
runs r times over whole arrays, never once per record).

Over 300 lines: the sketch, its scrambling mask and the exact noise share
one fixed-point grid, and the audit needs them side by side.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.exact_sampling import (
    discrete_laplace,
    discrete_laplace_variance,
    laplace_scale_fraction,
)
from shoal.common.mechanisms.secure_sum import SecureSumParams
from shoal.common.randomness import public_stream

MAX_SKETCH = 1 << 16  # m above this would make one report larger than the server's body limit
SENSITIVITY_MARGIN = 1 + 1e-5  # covers float32 rounding of |cos|, |sin| in the L1 bound 2 sqrt(2)
CHUNK = 4096  # records per vectorised block (bounds memory at ~CHUNK * r * d floats)
NOISE_CHUNK = 1 << 18  # Laplace draws per sampler call in a many-device scramble (whole devices; bounds the temporaries)
GRID_STEPS = 100  # grid rounding may add 2r steps: at most 1/GRID_STEPS of the sensitivity


@dataclass(frozen=True)
class SketchParams:
    """The public parameters of a sketch round (everything but the data).

    ``epsilon`` is the device's local guarantee for its whole sketch
    (replace-one-record neighbours); ``measurements`` is the paper's r."""

    dim: int
    size: int
    measurements: int
    epsilon: float
    seed: int
    scale_low: float
    scale_high: float

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise ConfigError(f"sketch dim must be >= 1, got {self.dim}")
        if not 1 <= self.size <= MAX_SKETCH:
            raise ConfigError(f"sketch size m must be in [1, {MAX_SKETCH}], got {self.size}")
        if not 1 <= self.measurements <= self.size:
            raise ConfigError(f"sketch measurements r must be in [1, m={self.size}], got {self.measurements}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"sketch epsilon must be finite and > 0, got {self.epsilon}")
        if not 0 <= self.seed < 2**63:
            raise ConfigError(f"sketch seed must be in [0, 2^63), got {self.seed}")
        if not (math.isfinite(self.scale_low) and 0 < self.scale_low <= self.scale_high <= 10):
            raise ConfigError(
                f"sketch bandwidths need 0 < scale_low <= scale_high <= 10, got {self.scale_low}, {self.scale_high}"
            )

    @property
    def alpha(self) -> float:
        """The subsampling parameter alpha_r = r / m (seed 002, Def. 3)."""
        return self.measurements / self.size

    def laplace_scale(self, n0: NDArray[np.int64] | NDArray[np.float64] | int) -> NDArray[np.float64]:
        """Scale b of a real Laplace on each real coordinate for the real-valued
        sensitivity 2 sqrt(2) sqrt(m) / n0 (module docstring): the mechanism
        of the analysis. What a device adds is ``noise_grid``'s discrete Laplace,
        whose scale is at least this."""
        return self.sensitivity(n0) / self.epsilon

    def sensitivity(self, n0: NDArray[np.int64] | NDArray[np.float64] | int) -> NDArray[np.float64]:
        """L1 change of a device sketch over n0 records when one record is
        replaced, in real arithmetic: 2 sqrt(2) sqrt(m) / n0."""
        sens = 2 * math.sqrt(2) * math.sqrt(self.size) * SENSITIVITY_MARGIN
        return sens / np.asarray(n0, dtype=np.float64)

    def noise_grid(self, n0: int) -> SketchNoise:
        """The exact mechanism for a device with n0 records (module docstring,
        "Exact noise"): grid 2^e, integer L1 sensitivity, discrete Laplace t / s."""
        return _noise_grid(self, int(n0))

    def noise_var_per_coordinate(self, n0: NDArray[np.int64] | int) -> NDArray[np.float64]:
        """Variance of the noise a device with n0 records adds to each real coordinate."""
        counts = np.asarray(n0, dtype=np.int64)
        values, inverse = np.unique(counts, return_inverse=True)
        per = np.array([self.noise_grid(int(v)).variance for v in values])
        return np.asarray(per[inverse].reshape(counts.shape))

    def paper_sigma(self, n0: int) -> float:
        """sigma_xi in the paper's parametrisation for the same noise (for reports)."""
        return float(np.sqrt(self.noise_var_per_coordinate(n0) / 2)) * 2 * math.sqrt(self.alpha * self.size * n0)


@dataclass(frozen=True)
class SketchNoise:
    """A device's exact sketch noise: values on the grid 2^exponent, integer L1
    sensitivity on that grid, discrete Laplace of scale t / s grid steps."""

    exponent: int
    sensitivity: int
    scale_num: int
    scale_den: int

    @property
    def step(self) -> float:
        return math.ldexp(1.0, self.exponent)

    @property
    def epsilon(self) -> float:
        """The exact eps of the draw: sensitivity * s / t (<= the round's eps)."""
        return self.sensitivity * self.scale_den / self.scale_num

    @property
    def variance(self) -> float:
        return self.step**2 * discrete_laplace_variance(self.scale_num, self.scale_den)


@lru_cache(maxsize=4096)
def _noise_grid(params: SketchParams, n0: int) -> SketchNoise:
    if n0 < 1:
        raise ConfigError(f"n0 must be >= 1, got {n0}")
    m, r = params.size, params.measurements
    sens = float(params.sensitivity(n0))
    exponent = math.floor(math.log2(sens / (GRID_STEPS * 2 * r)))
    step = math.ldexp(1.0, exponent)
    # Floating-point slack of the computed sum of n0 features per coordinate
    # (any summation order: gamma_n sum |f|, |f| <= 1) and of the two
    # scalings, for the two neighbouring sketches; generous by design.
    slack = 4.0 * (n0 + 4) * 2.0**-53 / (params.alpha * math.sqrt(m))
    sensitivity = math.ceil((sens + 2 * r * slack) / step) + 2 * r
    t, s = laplace_scale_fraction(sensitivity, params.epsilon)
    return SketchNoise(exponent, sensitivity, t, s)


def default_scales(dim: int, k: int) -> tuple[float, float]:
    """Bandwidth range from the public bound alone: from the unit ball's radius
    (1) down to a hundredth of it. With the Gaussian-atom decoder
    (``server/decoders/sketch/clompr.py``) the result barely depends on the range: on
    Schellekens et al.'s mixture (n = 1e5, k = d = 10, public radius 13) the
    relative SSE was 1.000 for a finest bandwidth of 0.01, 0.02 and 0.05,
    but 1.21 for 0.16 (at n = 1e6), so the range errs on the fine side;
    ``dim`` and ``k`` are accepted for rules that may use them."""
    if dim < 1 or k < 1:
        raise ConfigError(f"default_scales needs dim >= 1 and k >= 1, got dim={dim}, k={k}")
    return 0.01, 1.0


def default_size(dim: int, k: int) -> int:
    """m = 10 k d: where CL-OMPR succeeds (seed 002, Sec. 5, Fig. 2 right)."""
    return int(min(MAX_SKETCH, max(16, 10 * k * dim)))


def _adapted_radius(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """Inverse CDF of p(R) ~ sqrt(R^2 + R^4/4) exp(-R^2/2) on a fine grid."""
    grid = np.linspace(0.0, 12.0, 24001)
    pdf = np.sqrt(grid**2 + grid**4 / 4) * np.exp(-(grid**2) / 2)
    cdf = np.concatenate([[0.0], np.cumsum((pdf[1:] + pdf[:-1]) / 2)])
    return np.asarray(np.interp(u, cdf / cdf[-1], grid))


FREQUENCY_LABELS = {
    "directions": "shoal/v1/sketch/directions",  # Gaussians, (m, d) row-major: frequency j is row j
    "radii": "shoal/v1/sketch/radii",  # uniforms, m
    "bandwidths": "shoal/v1/sketch/bandwidths",  # uniforms, m
}


@lru_cache(maxsize=4)
def frequencies(params: SketchParams) -> NDArray[np.float64]:
    """The public frequency matrix Omega (d, m), a function of the params alone,
    computed once per round (cached on the frozen params, read-only: a device
    answering one round, or a simulation of many devices, derives it once;
    issue 45, Build 5: re-deriving it was a third of a device's sketch time).

    Read from the round's public streams (``common/randomness/public_stream.py``, labels
    in ``FREQUENCY_LABELS``; ``docs/protocol/public-randomness.md``):
    column j = (g_j / |g_j|) * R(u_j) / exp(log lo + v_j (log hi - log lo)),
    g_j Gaussian, u_j and v_j uniform. The radius table and the bandwidth
    use exp and log: implementations may differ by a few ulps. No privacy
    rests on it (the L1 sensitivity 2 sqrt(2) sqrt(m) / n0 and the exact
    grid argument hold for any Omega the device uses); the server's decode
    with its own Omega sees features moved by about |Omega^T x| ulps, far
    below the sketch's noise."""
    d, m = params.dim, params.size
    direction = public_stream.unit_rows(public_stream.gaussians(params.seed, FREQUENCY_LABELS["directions"], (m, d))).T
    radius = _adapted_radius(public_stream.uniforms(params.seed, FREQUENCY_LABELS["radii"], m))
    lo, hi = math.log(params.scale_low), math.log(params.scale_high)
    bandwidth = np.exp(lo + public_stream.uniforms(params.seed, FREQUENCY_LABELS["bandwidths"], m) * (hi - lo))
    omega = np.ascontiguousarray(direction * (radius / bandwidth)[None, :])
    omega.flags.writeable = False
    return omega


def features(x: NDArray[np.float64], omega: NDArray[np.float64]) -> NDArray[np.complex128]:
    """z_x = exp(i Omega^T x) / sqrt(m) for each row of x: (n, m)."""
    return np.asarray(np.exp(1j * (x @ omega)) / math.sqrt(omega.shape[1]))


def exact_sketch(x: NDArray[np.float64], omega: NDArray[np.float64]) -> NDArray[np.complex128]:
    """The non-private sketch of a dataset (seed 002, Eq. 2), computed in blocks."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] == 0:
        raise ConfigError("cannot sketch an empty dataset")
    owner = np.zeros(x.shape[0], dtype=np.int64)
    m = omega.shape[1]
    sums = _masked_sums(x, owner, 1, omega, m, np.random.default_rng(0))[0]  # r = m: no draw matters
    return (sums[:m] + 1j * sums[m:]) / x.shape[0]


def masks(n: int, m: int, r: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """n independent uniform r-subsets of range(m), as (n, r) indices.

    Floyd's algorithm, vectorised over the n rows: step j = m - r .. m - 1
    draws t uniform in [0, j] and takes t, or j if t is already taken; this
    yields every r-subset with probability 1 / C(m, r)."""
    taken = np.zeros((n, m), dtype=bool)
    out = np.empty((n, r), dtype=np.int64)
    rows = np.arange(n)
    for step, j in enumerate(range(m - r, m)):
        t = rng.integers(0, j + 1, size=n)
        pick = np.where(taken[rows, t], j, t)
        taken[rows, pick] = True
        out[:, step] = pick
    return out


def _cos_sin(x: NDArray[np.float32], omega: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """cos and sin of the phases x Omega in float32 (about 10x faster than
    float64 here). The phase error (~1e-5 rad) only moves a feature along
    the unit circle, so the L1 bound 2 sqrt(2) per entry still holds up to
    float32 rounding of |z| = 1, which ``SENSITIVITY_MARGIN`` covers.

    A device's few records: einsum, which sums over the d coordinates in
    order as the spec writes it (``docs/protocol/sketch.md``; the TypeScript
    device does the same) and never wakes BLAS threads (a 1 x 100 by
    100 x 8000 product took milliseconds on a busy 2-core machine); many
    records (simulation, the server's own sketches): BLAS."""
    ph = np.einsum("nd,dm->nm", x, omega) if x.shape[0] <= 16 else x @ omega
    return np.cos(ph), np.sin(ph)


def _group_sum(v: NDArray[np.float32], starts: NDArray[np.int64]) -> NDArray[np.float64]:
    """Row sums of contiguous groups, accumulated in float64."""
    if starts.size == 1:
        return np.asarray(v.sum(axis=0, dtype=np.float64))[None, :]
    if starts.size == v.shape[0]:
        return v.astype(np.float64)
    return np.asarray(np.add.reduceat(v, starts, axis=0, dtype=np.float64))


_FLOAT32: dict[int, tuple[NDArray[np.float64], NDArray[np.float32]]] = {}


def _float32(omega: NDArray[np.float64]) -> NDArray[np.float32]:
    """omega in float32, converted once per round when omega is a round's
    read-only frequency matrix (``frequencies``: 3.2 MB at d = 100,
    m = 8,000, otherwise converted on every report); any other array is
    converted each time."""
    if omega.flags.writeable:
        return omega.astype(np.float32)
    hit = _FLOAT32.get(id(omega))
    if hit is not None and hit[0] is omega:
        return hit[1]
    if len(_FLOAT32) >= 4:
        _FLOAT32.clear()
    om32 = omega.astype(np.float32)
    om32.flags.writeable = False
    _FLOAT32[id(omega)] = (omega, om32)
    return om32


def _masked_sums(
    x: NDArray[np.float64], owner: NDArray[np.int64], devices: int, omega: NDArray[np.float64], r: int,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """sum over each device's records of z_x (.) b_x as (devices, 2m) reals,
    [real parts | imaginary parts]: the layout the noise is added in, so no
    complex temporary is built per device (issue 42); ``owner`` is sorted
    (each device's records are contiguous)."""
    m = omega.shape[1]
    om32 = _float32(omega)
    out = np.zeros((devices, 2 * m))
    re, im = out[:, :m], out[:, m:]
    for lo in range(0, x.shape[0], CHUNK):
        xb, ob = x[lo : lo + CHUNK].astype(np.float32), owner[lo : lo + CHUNK]
        if r == m:
            cos, sin = _cos_sin(xb, om32)
            starts = np.flatnonzero(np.r_[True, ob[1:] != ob[:-1]])
            rows = ob[starts]
            re[rows] += _group_sum(cos, starts)
            im[rows] += _group_sum(sin, starts)
        else:
            idx = masks(xb.shape[0], m, r, rng)
            ph = np.einsum("nd,nrd->nr", xb, om32.T[idx])
            cos, sin = np.cos(ph), np.sin(ph)
            first, last = int(ob[0]), int(ob[-1])
            flat = ((ob - first)[:, None] * m + idx).ravel()
            size = (last - first + 1) * m
            re[first : last + 1] += np.bincount(flat, weights=cos.ravel(), minlength=size).reshape(-1, m)
            im[first : last + 1] += np.bincount(flat, weights=sin.ravel(), minlength=size).reshape(-1, m)
    out /= math.sqrt(m)
    return out


def scramble(
    records: NDArray[np.float64],
    n0: NDArray[np.int64],
    params: SketchParams,
    omega: NDArray[np.float64],
    rng: np.random.Generator,
) -> NDArray[np.complex128]:
    """Scrambled sketches of L devices (seed 002, Def. 3): ``records`` (N, d)
    are unit-ball points grouped by device, device l holding the next n0[l]
    rows. Returns (L, m); each row is eps-DP for its device's records."""
    x = np.asarray(records, dtype=np.float64)
    counts = np.asarray(n0, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != params.dim:
        raise ConfigError(f"records must have shape (N, {params.dim}), got {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(np.linalg.norm(x, axis=1) > 1 + 1e-9):
        raise ConfigError("records must be finite points of the unit ball (map them with the public bound)")
    if counts.ndim != 1 or np.any(counts < 1) or counts.sum() != x.shape[0]:
        raise ConfigError(f"n0 must be >= 1 per device and sum to {x.shape[0]} records")
    if omega.shape != (params.dim, params.size):
        raise ConfigError(f"frequencies have shape {omega.shape}, expected ({params.dim}, {params.size})")
    owner = np.repeat(np.arange(counts.size), counts)
    # The 2m reals of each device, [re | im], worked in place (issue 42: each whole-array pass over
    # (devices, 2m) costs about as much as a tenth of the device's noise draws).
    real = _masked_sums(x, owner, counts.size, omega, params.measurements, rng)
    real /= (params.alpha * counts)[:, None]
    m = params.size
    groups = np.unique(counts)
    for n0 in groups:
        rows = slice(None) if groups.size == 1 else np.flatnonzero(counts == n0)
        noise = params.noise_grid(int(n0))
        block = real[rows]  # a view when every device holds n0 records
        np.ldexp(block, -noise.exponent, out=block)
        np.rint(block, out=block)
        units = block.astype(np.int64)
        flat = units.reshape(-1)  # whole rows per call: one device's 2m draws are one call
        step = max(1, NOISE_CHUNK // units.shape[1]) * units.shape[1]
        for lo in range(0, flat.size, step):
            flat[lo:lo + step] += discrete_laplace(noise.scale_num, noise.scale_den, min(step, flat.size - lo), rng)
        np.ldexp(units, noise.exponent, out=block)
        if groups.size > 1:
            real[rows] = block
    out = np.empty((counts.size, m), dtype=np.complex128)
    out.real, out.imag = real[:, :m], real[:, m:]
    return out


def off_grid(sketches: NDArray[np.float64], n0: NDArray[np.int64], params: SketchParams) -> int:
    """How many of the (L, 2m) received sketch reals are not integer multiples
    of their device's public grid step (0 for every honest device)."""
    bad = 0
    counts = np.asarray(n0, dtype=np.int64)
    for v in np.unique(counts):
        units = np.ldexp(sketches[counts == v], -params.noise_grid(int(v)).exponent)
        bad += int(np.count_nonzero((units != np.rint(units)) | (np.abs(units) >= 2.0**53)))
    return bad


def mean_sketch(sketches: NDArray[np.complex128], n0: NDArray[np.int64]) -> NDArray[np.complex128]:
    """Global sketch (seed 002, Def. 4, weighted by n0 for unequal devices)."""
    w = np.asarray(n0, dtype=np.float64)
    return np.asarray((w[:, None] * sketches).sum(axis=0) / w.sum())


def noise_variance(params: SketchParams, n0: NDArray[np.int64] | NDArray[np.float64], z_norm2: float) -> float:
    """sum_j Var(s_j) of the global sketch (module docstring; seed 002 Eq. 6 for equal n0). ``n0``: each
    device's records, whole numbers (float64 as a round's stored sketch rows carry them)."""
    counts = np.asarray(n0, dtype=np.float64)
    total = counts.sum()
    sampling = (1 - params.alpha * z_norm2) / (params.alpha * total)
    per_device = counts**2 * params.noise_var_per_coordinate(np.asarray(n0, dtype=np.int64))
    laplace = 2 * params.size * float(np.sum(per_device)) / total**2
    return float(sampling + laplace)


def predicted_snr(params: SketchParams, n0: NDArray[np.int64], z_norm2: float = 0.35) -> float:
    """Seed 002, Eq. (6)-(7): the SNR expected for ||z||^2 (0.35 is the paper's
    typical value for Gaussian mixtures, Sec. 5)."""
    return z_norm2 / noise_variance(params, n0, z_norm2)


def estimated_snr(sketch: NDArray[np.complex128], params: SketchParams, n0: NDArray[np.int64]) -> float:
    """SNR with ||z||^2 estimated from the noisy global sketch itself, using
    E ||s||^2 = ||z||^2 + sum_j Var(s_j) (two fixed-point steps, as the
    variance depends weakly on ||z||^2). Post-processing of private data."""
    z2 = signal_power(sketch, lambda v: noise_variance(params, n0, v))
    return z2 / noise_variance(params, n0, z2)


def signal_power(sketch: NDArray[np.complex128], variance: Callable[[float], float]) -> float:
    """||z||^2 estimated from a noisy sketch s: E ||s||^2 = ||z||^2 + variance(||z||^2),
    solved by two fixed-point steps (the variance depends weakly on ||z||^2), in [0, 1]."""
    power = float(np.sum(np.abs(sketch) ** 2))
    z2 = 0.0
    for _ in range(2):
        z2 = min(max(power - variance(z2), 0.0), 1.0)
    return z2


def record_features(x: NDArray[np.float64], omega: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each record's sketch as 2m reals (real parts, then imaginary parts):
    what a one-record device feeds into the shuffle model's secure sum."""
    z = features(np.asarray(x, dtype=np.float64), omega)
    return np.concatenate([z.real, z.imag], axis=1)


def secure_sum_params(
    params: SketchParams, epsilon: float, delta: float, min_devices: int, max_devices: int | None = None,
    scale: int = 1 << 16,
) -> SecureSumParams:
    """Shuffle-model sketch (issue 5, item 4): one-record devices add their
    2m feature reals through ``secure_sum``; the noise is calibrated to the
    *central* sensitivity of the sum (one record's L1 norm is at most
    sqrt(2) sqrt(m): |cos| + |sin| <= sqrt(2) per entry, over sqrt(m)), so
    the mean sketch carries noise O(sqrt(m) / (eps n)) per entry, as a
    centralised Laplace sketch does, instead of the local model's
    O(sqrt(m) / eps) per device."""
    m = params.size
    return SecureSumParams.derive(
        2 * m,
        l1_norm=math.sqrt(2) * math.sqrt(m) * SENSITIVITY_MARGIN,
        max_abs=1 / math.sqrt(m),
        max_nonzero=2 * m,
        epsilon=epsilon,
        delta=delta,
        min_devices=min_devices,
        max_devices=max_devices,
        scale=scale,
    )


def sketch_from_sum(total: NDArray[np.float64], devices: int) -> NDArray[np.complex128]:
    """The mean sketch from a decoded secure-sum total of 2m reals."""
    m = total.shape[0] // 2
    return np.asarray((total[:m] + 1j * total[m:]) / devices)


def shuffle_noise_variance(sum_params: SecureSumParams, devices: int, z_norm2: float) -> float:
    """sum_j Var(s_j) of the shuffle-model mean sketch: sampling plus the
    discrete Laplace of the total on 2m reals (rounding adds < 1 / (4 scale^2))."""
    noise = sum_params.length * (sum_params.noise_std**2 + 0.25 / sum_params.scale**2)
    return float((1 - z_norm2) / devices + noise / devices**2)
