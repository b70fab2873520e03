"""The running total of a secure-sum round's shares, mod q (refine rounds)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.mechanisms.secure_sum import SecureSumParams, add_shares, decode_total


class ShareTotal:
    """Shares (n, L + 1) added mod q: linear and mergeable. ``decode`` checks
    that no device's shares are missing (the check coordinate) and returns the
    noisy total of every device's vector and how many devices it holds."""

    def __init__(self, params: SecureSumParams) -> None:
        self.params = params
        self.total = np.zeros(params.length + 1, dtype=np.uint64)
        self.shares = 0

    def add(self, shares: NDArray[np.uint64]) -> None:
        mask = np.uint64(self.params.modulus - 1)
        self.total = (self.total + add_shares(shares, self.params)) & mask
        self.shares += shares.reshape(-1, self.params.length + 1).shape[0]

    def merge(self, other: ShareTotal) -> None:
        self.total = (self.total + other.total) & np.uint64(self.params.modulus - 1)
        self.shares += other.shares

    def decode(self) -> tuple[NDArray[np.float64], int]:
        return decode_total(self.total, self.shares, self.params)
