"""shoal 0.1's floating-point samplers, kept in the tests only, with the
replay attacks that break them: the check that the bit-level audits have teeth.

- ``LegacyPrivUnit``: PrivUnit_2 with a cap draw t = 2 betaincinv(a, a, q) - 1,
  q on the 2^-53 grid (Bhowmick et al. 2018 as shoal 0.1 computed it).
  ``privunit_reachable_from_axis`` replays it: for an input on axis e1 the
  output's first coordinate is exactly t / scale, so an attacker checks
  whether that double is reachable from some grid q.
- ``legacy_laplace``: textbook ``loc + b * Laplace(0, 1)`` from numpy's
  ``log(2U)`` transform. ``laplace_reachable`` replays numpy's sampler:
  given a candidate loc, recover U, round it to the 2^-53 grid and test
  whether some neighbour reproduces the output double exactly (Mironov,
  CCS'12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special


@dataclass(frozen=True)
class LegacyPrivUnit:
    dim: int
    epsilon: float
    gamma: float
    cap_probability: float

    @property
    def a(self) -> float:
        return (self.dim - 1) / 2.0

    @property
    def scale(self) -> float:
        a, g, p = self.a, self.gamma, self.cap_probability
        sigma = float(special.betaincc(a, a, (1 + g) / 2))
        mom = (1 - g * g) ** a / ((self.dim - 1) * special.beta(0.5, a))
        return p * mom / sigma - (1 - p) * mom / (1 - sigma)

    @classmethod
    def calibrate(cls, dim: int, epsilon: float) -> LegacyPrivUnit:
        a = (dim - 1) / 2.0
        grid = np.linspace(0.0, 0.9999, 4000)
        sigma = special.betaincc(a, a, (1 + grid) / 2)
        ok = (sigma > 1e-300) & (sigma < 1)
        p = 1 / (1 + np.exp(-(epsilon - np.log((1 - sigma[ok]) / sigma[ok]))))
        mom = (1 - grid[ok] ** 2) ** a / ((dim - 1) * special.beta(0.5, a))
        m = p * mom / sigma[ok] - (1 - p) * mom / (1 - sigma[ok])
        i = int(np.argmax(np.where(m > 0, m, -np.inf)))
        return cls(dim, epsilon, float(grid[ok][i]), float(p[i]) * (1 - 1e-12))

    def privatise(self, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """shoal 0.1's ``privatise`` for unit-vector rows ``u``."""
        n, d = u.shape
        a = self.a
        tau = (1 + self.gamma) / 2
        f_tau = float(special.betainc(a, a, tau))
        in_cap = rng.random(n) < self.cap_probability
        v = rng.random(n)
        q = np.where(in_cap, f_tau + v * (1 - f_tau), v * f_tau)
        b = special.betaincinv(a, a, q)
        b = np.where(in_cap, np.maximum(b, tau), np.minimum(b, np.nextafter(tau, 0)))
        t = 2 * b - 1
        w = rng.standard_normal((n, d))
        w -= np.einsum("ij,ij->i", w, u)[:, None] * u
        w /= np.linalg.norm(w, axis=1)[:, None]
        out = t[:, None] * u + np.sqrt(np.maximum(1 - t * t, 0.0))[:, None] * w
        return out / self.scale


def privunit_reachable_from_axis(z0: np.ndarray, mech: LegacyPrivUnit, spread: int = 4) -> np.ndarray:
    """Is each double z0 = out[0] reachable as t / scale for input e1 (replay of q on the grid)?"""
    a, scale = mech.a, mech.scale
    tau = (1 + mech.gamma) / 2
    f_tau = float(special.betainc(a, a, tau))
    t = z0 * scale
    q_hat = special.betainc(a, a, np.clip((t + 1) / 2, 0, 1))
    hit = np.zeros(z0.shape, dtype=bool)
    for cap in (True, False):
        v_hat = (q_hat - f_tau) / (1 - f_tau) if cap else q_hat / f_tau
        k_hat = np.rint(v_hat * 2.0**53)
        for dk in range(-spread, spread + 1):
            v = np.clip(k_hat + dk, 0, 2.0**53 - 1) * 2.0**-53
            q = f_tau + v * (1 - f_tau) if cap else v * f_tau
            b = special.betaincinv(a, a, q)
            b = np.maximum(b, tau) if cap else np.minimum(b, np.nextafter(tau, 0))
            hit |= (2 * b - 1) / scale == z0
    return hit


def legacy_laplace(loc: np.ndarray, b: float, rng: np.random.Generator) -> np.ndarray:
    """shoal 0.1's sketch noise: loc + Laplace(0, 1) * b (numpy's log(2U) sampler)."""
    return loc + rng.laplace(0.0, 1.0, loc.shape) * b


def laplace_reachable(out: np.ndarray, loc: np.ndarray, b: float, spread: int = 3) -> np.ndarray:
    """Could ``out`` have come from ``loc`` through ``legacy_laplace``? (replay per element)"""
    noise = (out - loc) / b
    u_hat = np.where(noise >= 0, 1 - np.exp(-noise) / 2, np.exp(noise) / 2)
    k_hat = np.rint(u_hat * 2.0**53)
    hit = np.zeros(out.shape, dtype=bool)
    for dk in range(-spread, spread + 1):
        u = np.clip(k_hat + dk, 1, 2.0**53 - 1) * 2.0**-53
        with np.errstate(divide="ignore"):
            lap = np.where(u >= 0.5, 0.0 - 1.0 * np.log(2.0 - u - u), 0.0 + 1.0 * np.log(u + u))
        hit |= loc + lap * b == out
    return hit


def replay_rate(reachable: np.ndarray) -> float:
    """Share of outputs an attacker's replay reproduces."""
    return float(np.mean(reachable)) if reachable.size else math.nan
