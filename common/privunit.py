"""PrivUnit_2: an eps-LDP randomiser for vectors in the unit L2 ball.

Bhowmick, Duchi, Freudiger, Kapoor, Rogers, "Protection Against
Reconstruction and Its Applications in Private Federated Learning" (2018),
Alg. 1. DESIGN.md picks it over Duchi et al.'s mechanism: several times less
variance at eps >= 1 (d=100, eps=4: E||z||^2 = 44 against 169).

Mechanism on a unit vector u: draw V uniform on the sphere, conditioned on
the cap {<V,u> >= gamma} with probability p and on its complement
otherwise; output Z = V / m with m = E<V,u>, so E[Z] = u. The density of V is
p/sigma on the cap and (1-p)/(1-sigma) off it (sigma = the cap's share of
the sphere), so for any two inputs the likelihood ratio is at most
    (p / (1-p)) * ((1 - sigma) / sigma) = e^eps,
which is how ``calibrate`` ties (gamma, p) to eps exactly. Inputs x in the
ball are first rounded to +-x/|x| with P(+) = (1+|x|)/2 (unbiased, and a
mixture of eps-DP mechanisms is eps-DP).

With t = <V,u>, (1+t)/2 ~ Beta(a, a), a = (d-1)/2, so a cap sample is an
inverse regularised incomplete beta of a uniform restricted to the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import special

from shoal.common.errors import ConfigError
from shoal.common.events import PrivUnitEvent


@dataclass(frozen=True)
class PrivUnitParams:
    """A calibrated PrivUnit randomiser: dim, eps and the cap (gamma, p)."""

    dim: int
    epsilon: float
    gamma: float
    cap_probability: float

    def __post_init__(self) -> None:
        if self.dim < 2:
            raise ConfigError(f"PrivUnit needs dim >= 2, got {self.dim}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"PrivUnit epsilon must be finite and > 0, got {self.epsilon}")
        if not -1.0 < self.gamma < 1.0:
            raise ConfigError(f"PrivUnit gamma must be in (-1, 1), got {self.gamma}")
        if not 0.0 < self.cap_probability < 1.0:
            raise ConfigError(f"PrivUnit p must be in (0, 1), got {self.cap_probability}")
        ratio = math.log(self.cap_probability / (1 - self.cap_probability)) + math.log(
            (1 - self.cap_share) / self.cap_share
        )
        if ratio > self.epsilon * (1 + 1e-9) + 1e-12:
            raise ConfigError(
                f"PrivUnit (gamma={self.gamma}, p={self.cap_probability}) has likelihood "
                f"ratio e^{ratio:.6f} > e^{self.epsilon}"
            )

    @property
    def alpha(self) -> float:
        return (self.dim - 1) / 2.0

    @property
    def cap_share(self) -> float:
        """sigma: the cap's share of the sphere, P(t >= gamma) for uniform V."""
        return float(special.betaincc(self.alpha, self.alpha, (1 + self.gamma) / 2))

    @property
    def scale(self) -> float:
        """m = E<V, u>; outputs are V / m."""
        return _scale(self.dim, self.gamma, self.cap_probability)

    @property
    def expected_sq_norm(self) -> float:
        """E||Z||^2 = 1 / m^2 (exact: every output has this norm)."""
        return 1.0 / self.scale**2

    @property
    def event(self) -> PrivUnitEvent:
        return PrivUnitEvent(
            epsilon=self.epsilon, dim=self.dim, gamma=self.gamma, cap_probability=self.cap_probability
        )

    @classmethod
    def calibrate(cls, dim: int, epsilon: float) -> PrivUnitParams:
        """The (gamma, p) with exact ratio e^eps that minimises E||Z||^2."""
        gamma, p = _calibrate(int(dim), float(epsilon))
        return cls(dim=int(dim), epsilon=float(epsilon), gamma=gamma, cap_probability=p)


def _cap_moment(dim: int, gamma: float) -> float:
    """E[t 1{t >= gamma}] for t = <V,u>, V uniform on S^{d-1}."""
    a = (dim - 1) / 2.0
    return (1 - gamma * gamma) ** a / ((dim - 1) * special.beta(0.5, a))


def _scale(dim: int, gamma: float, p: float) -> float:
    a = (dim - 1) / 2.0
    sigma = float(special.betaincc(a, a, (1 + gamma) / 2))
    mom = _cap_moment(dim, gamma)
    # E[t | cap] = mom / sigma and E[t | not cap] = -mom / (1 - sigma) since E[t] = 0.
    return p * mom / sigma - (1 - p) * mom / (1 - sigma)


@lru_cache(maxsize=256)
def _calibrate(dim: int, epsilon: float) -> tuple[float, float]:
    if dim < 2 or not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"cannot calibrate PrivUnit for dim={dim}, epsilon={epsilon}")
    a = (dim - 1) / 2.0
    best: tuple[float, float, float] = (math.inf, 0.0, 0.5)
    # Coarse then fine search over gamma; p follows from the exact ratio.
    lo, hi = 0.0, 0.9999
    for _ in range(3):
        grid = np.linspace(lo, hi, 400)
        sigma = special.betaincc(a, a, (1 + grid) / 2)
        ok = (sigma > 1e-300) & (sigma < 1)
        log_odds = epsilon - np.log((1 - sigma[ok]) / sigma[ok])
        p = 1 / (1 + np.exp(-log_odds))
        mom = (1 - grid[ok] ** 2) ** a / ((dim - 1) * special.beta(0.5, a))
        m = p * mom / sigma[ok] - (1 - p) * mom / (1 - sigma[ok])
        with np.errstate(divide="ignore", over="ignore"):
            var = np.where(m > 0, 1 / np.maximum(m, 1e-150) ** 2, np.inf)
        i = int(np.argmin(var))
        if var[i] < best[0]:
            best = (float(var[i]), float(grid[ok][i]), float(p[i]))
        step = (hi - lo) / 399
        lo, hi = max(0.0, best[1] - 2 * step), min(0.9999, best[1] + 2 * step)
    _, gamma, p = best
    # Shave p by a hair so the ratio is <= e^eps despite rounding.
    sigma = float(special.betaincc(a, a, (1 + gamma) / 2))
    p_max = 1 / (1 + math.exp(-(epsilon - math.log((1 - sigma) / sigma))))
    return gamma, min(p, p_max) * (1 - 1e-12)


def round_to_sphere(
    x: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """Unbiased randomised rounding of ball points to +-x/|x| (E = x)."""
    norms = np.linalg.norm(x, axis=1)
    safe = np.where(norms > 0, norms, 1.0)
    u = x / safe[:, None]
    u[norms == 0] = 0.0
    u[norms == 0, 0] = 1.0
    sign = np.where(rng.random(x.shape[0]) < (1 + np.minimum(norms, 1.0)) / 2, 1.0, -1.0)
    return u * sign[:, None]


def privatise(
    x: NDArray[np.float64], params: PrivUnitParams, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Apply PrivUnit to each row of ``x`` (rows in the unit ball); eps-LDP per row."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    if d != params.dim:
        raise ConfigError(f"PrivUnit calibrated for dim {params.dim}, got points of dim {d}")
    u = round_to_sphere(x, rng)
    a = params.alpha
    tau = (1 + params.gamma) / 2
    f_tau = float(special.betainc(a, a, tau))
    in_cap = rng.random(n) < params.cap_probability
    v = rng.random(n)
    # Uniform on [F(tau), 1) for the cap, on [0, F(tau)) for its complement.
    q = np.where(in_cap, f_tau + v * (1 - f_tau), v * f_tau)
    b = special.betaincinv(a, a, q)
    # Guard the sides against round-off at the boundary.
    b = np.where(in_cap, np.maximum(b, tau), np.minimum(b, np.nextafter(tau, 0)))
    t = 2 * b - 1
    w = rng.standard_normal((n, d))
    w -= np.einsum("ij,ij->i", w, u)[:, None] * u
    w /= np.linalg.norm(w, axis=1)[:, None]
    out = t[:, None] * u + np.sqrt(np.maximum(1 - t * t, 0.0))[:, None] * w
    out /= params.scale
    return out
