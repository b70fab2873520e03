"""Hadamard matrix entries and the fast Walsh-Hadamard transform.

The vector report ties a device's point to its node by the sign
H[r, c(node)] of a uniformly random Hadamard row r (DESIGN.md, "vector
report"); the server recovers every column's signed sum with one FWHT per
level: O(m log m) for all m columns instead of O(n) per query.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def hadamard_sign(rows: NDArray[np.int64], cols: NDArray[np.int64]) -> NDArray[np.float64]:
    """H[r, c] = (-1)^popcount(r & c) of the Sylvester Hadamard matrix, elementwise."""
    parity = np.bitwise_count(np.bitwise_and(rows, cols).astype(np.uint64)) & np.uint8(1)
    return 1.0 - 2.0 * parity.astype(np.float64)


def fwht(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """Unnormalised Walsh-Hadamard transform along axis 0 (length a power of 2).

    Returns ``H @ a`` for the Sylvester matrix H without forming it. Works on
    (m,) and (m, d) arrays; the input is not modified.
    """
    return fwht_in_place(np.array(a, dtype=np.float64, copy=True))


def fwht_in_place(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``fwht`` overwriting ``x`` (a contiguous float64 array) and returning it:
    no copy of the input (a decode transforms its accumulator's 0.7 GB vector
    table level by level instead of holding a second one, issue 19)."""
    m = x.shape[0]
    if m & (m - 1):
        raise ValueError(f"fwht needs a power-of-two length, got {m}")
    if x.dtype != np.float64 or not x.flags.c_contiguous:
        raise ValueError("fwht_in_place needs a C-contiguous float64 array")
    tail = x.shape[1:]
    h = 1
    while h < m:
        v = x.reshape((m // (2 * h), 2, h) + tail)
        top = v[:, 0].copy()
        v[:, 0] += v[:, 1]
        v[:, 1] = top - v[:, 1]
        h *= 2
    return x
