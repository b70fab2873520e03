"""The public random stream of a round: numbers any language derives from (seed, label).

Every public object a device needs (projection, lattice shifts, SimHash
planes, node-hash and OLH keys, sketch frequencies, partition hyperplanes,
PrivUnit codebook keys) is read from one stream per (round seed, domain
label), so that a device written in another language reproduces it from the
signed config alone (issue 45, Build 1; the derivation is written out in
``docs/protocol/public-randomness.md``, which this module implements):

* bytes: SHAKE-256 (FIPS 202) of ``encode(seed, label)``: the protocol
  version (u32 LE), the seed (u64 LE), the label's UTF-8 length (u32 LE) and
  the label; read as many bytes as needed (an XOF: reading more never changes
  the earlier bytes);
* words: consecutive 8-byte little-endian uint64 of those bytes;
* uniforms in [0, 1): (w >> 11) * 2^-53 (exact in binary64);
* signs: bit i of the byte stream (byte i // 8, bit i % 8 from the least
  significant) gives +1 for 0 and -1 for 1;
* integers below b: words taken in order, w kept if w < 2^64 - (2^64 mod b),
  answer w mod b (rejection: no modulo bias);
* Gaussians: Box-Muller in binary64 on each word: u1 = ((w >> 32) + 1/2)
  2^-32 in (0, 1), u2 = (w mod 2^32) 2^-32, r = sqrt(-2 log u1), then
  r cos(2 pi u2) and r sin(2 pi u2), in that order. ``log``, ``cos`` and
  ``sin`` are the only operations that are not correctly rounded; the spec
  lets implementations differ there by a few ulps and the tests show such
  differences touch no privacy property (``tests/common/randomness/test_public_stream.py``).

Only public objects come from here: device-private randomness is OS entropy
(``client.encoder.device_rng``). Everything is vectorised: one SHAKE call per
object (8 MB, a sketch's 10^6 frequencies, in ~30 ms on this machine).
"""

from __future__ import annotations

import hashlib
import math
import struct

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError

PROTOCOL_VERSION = 2
"""The wire protocol this code speaks (0: numpy-derived public randomness, before issue 45)."""
PROTOCOLS = (2,)
"""Every protocol version this build's devices and server accept in configs and messages."""

_TWO_PI = 2 * math.pi
_U64 = 1 << 64


def encode(seed: int, label: str, version: int = PROTOCOL_VERSION) -> bytes:
    """The SHAKE-256 input for (seed, label): version u32 LE | seed u64 LE | len u32 LE | label UTF-8."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= int(seed) < _U64:
        raise ConfigError(f"a public stream's seed must be an integer in [0, 2^64), got {seed!r}")
    raw = label.encode("utf-8")
    return struct.pack("<IQI", version, int(seed), len(raw)) + raw


def stream_bytes(seed: int, label: str, n: int) -> bytes:
    """The first ``n`` bytes of the stream (seed, label)."""
    return hashlib.shake_256(encode(seed, label)).digest(n)


def words(seed: int, label: str, n: int) -> NDArray[np.uint64]:
    """The first ``n`` little-endian uint64 words of the stream."""
    return np.frombuffer(stream_bytes(seed, label, 8 * n), dtype="<u8").astype(np.uint64)


def key64(seed: int, label: str) -> int:
    """The stream's first word: a 64-bit public key (node hashes, codebooks)."""
    return int(words(seed, label, 1)[0])


def to_uniforms(w: NDArray[np.uint64]) -> NDArray[np.float64]:
    """(w >> 11) 2^-53: uniform on the 2^53 doubles k 2^-53 in [0, 1), exact."""
    return (np.asarray(w, dtype=np.uint64) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def uniforms(seed: int, label: str, shape: int | tuple[int, ...]) -> NDArray[np.float64]:
    """Uniforms in [0, 1), one word each, in row-major order of ``shape``."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return to_uniforms(words(seed, label, math.prod(shape))).reshape(shape)


def signs(seed: int, label: str, shape: int | tuple[int, ...]) -> NDArray[np.int8]:
    """+-1 from the stream's bits (LSB first in each byte; 0 -> +1), row-major."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = math.prod(shape)
    raw = np.frombuffer(stream_bytes(seed, label, (n + 7) // 8), dtype=np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[:n]
    return (1 - 2 * bits.astype(np.int8)).reshape(shape)


def integers_below(seed: int, label: str, bound: int, n: int) -> NDArray[np.uint64]:
    """``n`` integers uniform in [0, bound) (1 <= bound <= 2^64): the stream's
    words in order, each kept iff w < 2^64 - (2^64 mod bound), answered w mod bound."""
    if not 1 <= bound <= _U64:
        raise ConfigError(f"integers_below needs 1 <= bound <= 2^64, got {bound}")
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    limit = _U64 - (_U64 % bound)  # a multiple of bound; 2^64 when bound is a power of two
    want = n + 16 + n // 8  # acceptance > 1/2 always, > 0.9 unless bound is near 2^63+
    while True:
        w = words(seed, label, want)
        kept = w if limit == _U64 else w[w < np.uint64(limit)]
        if kept.shape[0] >= n:
            return kept[:n] % np.uint64(bound) if bound < _U64 else kept[:n]
        want *= 2


def box_muller(w: NDArray[np.uint64]) -> NDArray[np.float64]:
    """Two standard Gaussians per word, binary64: shape w.shape[:-1] + (2 w.shape[-1],),
    interleaved (r cos, r sin) per word. u1 lies in (0, 1) (never 0: log is finite;
    never 1: r > 0), so |g| <= sqrt(2 * 33 log 2) = 6.76."""
    w = np.asarray(w, dtype=np.uint64)
    u1 = ((w >> np.uint64(32)).astype(np.float64) + 0.5) * 2.0**-32
    u2 = (w & np.uint64(0xFFFFFFFF)).astype(np.float64) * 2.0**-32
    r = np.sqrt(-2.0 * np.log(u1))
    ang = _TWO_PI * u2
    out = np.empty(w.shape[:-1] + (2 * w.shape[-1],), dtype=np.float64)
    out[..., 0::2] = r * np.cos(ang)
    out[..., 1::2] = r * np.sin(ang)
    return out


def gaussians(seed: int, label: str, shape: int | tuple[int, ...]) -> NDArray[np.float64]:
    """Standard Gaussians in row-major order of ``shape``: ``box_muller`` of the
    first ceil(n / 2) words, the last sine dropped when n is odd."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = math.prod(shape)
    return box_muller(words(seed, label, (n + 1) // 2))[:n].reshape(shape)


def unit_rows(g: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each row divided by its Euclidean norm (directions uniform on the sphere
    when the rows are Gaussian). The norm's summation order is free in the spec."""
    return np.asarray(g / np.maximum(np.linalg.norm(g, axis=-1, keepdims=True), 1e-300))
