"""``encoder: "auto"``: which tree encoder a round uses, chosen before any
report exists from public parameters only (n expected, d, k, the device's
eps), by a rule read off measurements (issue 15)."""

from __future__ import annotations

from typing import Literal

Encoder = Literal["lsh", "nettree"]
EncoderChoice = Literal["auto", "lsh", "nettree"]

# ``choose_encoder``: nettree up to this dimension; in d = 3 also while the
# device signal n * eps0^2 is below AUTO_D3_SIGNAL; lsh above.
AUTO_NETTREE_MAX_DIM = 2
AUTO_D3_SIGNAL = 1e6


def choose_encoder(n_expected: int, dim: int, k: int, device_epsilon: float) -> Encoder:
    """``encoder: "auto"``: the tree encoder for (n, d, k, eps0), by a rule read
    off measurements (issue 15; eps0 is the device's epsilon, the amplified
    one in the shuffle model, so the model enters through it).

    Measured (normalised objective, lsh / nettree, mean of 2-3 seeds, at
    ed4d607; README "Which encoder" has the current sweep's figures):
    - d = 2: nettree wins everywhere, by far: Uber n=1e5 1.6 / 2.2 / 4.1 /
      5.4 at eps 1 / 2 / 4 / 8; city n=1e5 1.9 / 3.4 at eps 1 / 4; the paper
      generator in d=2, n=1e4: 5.0 / 360 at eps 1 / 4. In the plane the
      identity lattice resolves a cluster to its cell; LSH sign bits only
      cut it into wedges.
    - d = 3: it depends on the signal n eps0^2. The paper generator n=1e5:
      2.75 / 1.04 / 0.79 / 0.30 at eps 1 / 2 / 4 / 8 and n=1e4 eps=4: 2.80;
      skewed box n=1e5: 1.00 / 1.21 / 0.85 / 0.82. nettree while
      n eps0^2 < 1e6 (n=1e5, eps < ~3.2), lsh above.
    - d = 4: lsh, or at most 17% behind: the paper generator n=1e5 0.54 /
      0.40 / 0.13 at eps 1 / 2 / 4; skewed box 1.00 / 0.82 / 1.07 / 1.17.
    - d >= 5: lsh; the paper generator d=5 n=1e5 0.63 / 0.18 / 0.19 at eps
      1 / 4 / 8; skewed box d=7 (n=5e4) 1.01 / 1.00 / 0.92 / 0.64; letter
      d=16 (n=2e4) 1.03 / 1.01 / 0.97 / 0.87; the paper generator d=100
      n=1e5 1.00 / 1.00 / 0.39 / 0.27.
    Every ``shoal bench`` cell is then within 3% of the better encoder
    (letter eps=1: lsh 1.03x nettree, within noise). k enters through
    ``derive_config`` (nettree's projection ceil(log2 k) + 3 >= d for every
    k >= 2 when d <= 3, so auto's nettree rounds are identity rounds). The
    projection dimension, levels and budget split then follow from the
    chosen encoder in ``derive_config``.
    """
    if dim <= AUTO_NETTREE_MAX_DIM:
        return "nettree"
    if dim == 3 and n_expected * device_epsilon**2 < AUTO_D3_SIGNAL:
        return "nettree"
    return "lsh"
