"""A device's private randomness: the one seam every private random byte goes through.

A device draws private randomness for its randomisers' coins (a numpy
``Generator``: root coin, levels, OLH and PrivUnit coins, secure-sum masks
and noise, sketch masks and noise), its message ids, continual item tokens,
and each sealed envelope's ephemeral X25519 key and AEAD nonce. All of it
comes from here:

- ``generator()``: a ``Generator`` for the randomisers;
- ``token_bytes(n)``: n raw bytes (ids, tokens, keys, nonces).

By default both are OS entropy (``secrets``; a Generator seeded with 128
bits from ``SeedSequence``, never from a round's public seed). Inside
``replay(data)``, used only by the conformance vectors
(``deploy/protocol_vectors.py``, ``protocol/vectors/``) and tests, both read
``data`` in order instead, so a vector can state "the device's private
random bytes" and a device in another language can reproduce the exact
message from them (``docs/protocol/vectors.md``). The reads, in the order
the device makes them:

- ``u64``: the next 8 bytes, little-endian;
- ``u32``: the next 4 bytes, little-endian;
- ``double``: ``(u64 >> 11) * 2^-53``;
- ``bytes(n)``: the next n bytes.

The Generator's methods turn these reads into numbers with numpy's
documented algorithms (``docs/protocol/vectors.md`` states the ones a device
uses: ``random`` is one double; ``integers`` is Lemire's rejection on a u32
or a u64). The Generator reads the stream through numpy's C interface for
bit generators (``bitgen_t``: ``next_uint64``, ``next_uint32``,
``next_double``), called back through ``ctypes``: slow (a Python call per
read), which only conformance vectors and tests ever pay.

A replay that runs out of bytes cannot raise inside numpy's C loop: the read
returns zeros and ``replay`` raises :class:`ReplayError` when it ends.
"""

from __future__ import annotations

import ctypes
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from shoal.common.errors import ShoalError

__all__ = ["ReplayError", "ReplaySource", "generator", "replay", "token_bytes"]

_U64 = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)
_U32 = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p)
_DOUBLE = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p)


class _BitGen(ctypes.Structure):
    """numpy's ``bitgen_t`` (numpy/random/bitgen.h), the documented C interface of a bit generator."""

    _fields_ = [("state", ctypes.c_void_p), ("next_uint64", _U64), ("next_uint32", _U32),
                ("next_double", _DOUBLE), ("next_raw", _U64)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_CAPSULE_NAME = b"BitGenerator"


class ReplayError(ShoalError):
    """A replayed device read more private bytes than the replay holds."""


class ReplaySource:
    """Private bytes read in order; ``reads`` logs each read as (op, count) runs
    (op: "u64", "u32", "double" or "bytes:<n>") for the vectors' trace."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.position = 0
        self.overrun = False
        self.reads: list[list[object]] = []

    def _log(self, op: str) -> None:
        if self.reads and self.reads[-1][0] == op:
            self.reads[-1][1] = int(self.reads[-1][1]) + 1  # type: ignore[call-overload]
        else:
            self.reads.append([op, 1])

    def _take(self, n: int) -> bytes:
        out = self.data[self.position:self.position + n]
        self.position += n
        if len(out) < n:
            self.overrun = True
            out = out + bytes(n - len(out))
        return out

    def u64(self) -> int:
        self._log("u64")
        return int.from_bytes(self._take(8), "little")

    def u32(self) -> int:
        self._log("u32")
        return int.from_bytes(self._take(4), "little")

    def double(self) -> float:
        self._log("double")
        return (int.from_bytes(self._take(8), "little") >> 11) * 2.0 ** -53

    def token_bytes(self, n: int) -> bytes:
        self._log(f"bytes:{n}")
        return self._take(n)

    def generator(self) -> np.random.Generator:
        """A numpy Generator whose every read comes from this source, in order."""
        return np.random.Generator(_ReplayBitGenerator(self))  # type: ignore[arg-type]


class _ReplayBitGenerator:
    """What ``np.random.Generator`` takes from a bit generator: a ``capsule``
    holding a ``bitgen_t`` and a ``lock``. The callbacks and the struct are
    kept alive here as long as the Generator holds this object."""

    def __init__(self, source: ReplaySource) -> None:
        self.lock = threading.Lock()
        self._callbacks = (_U64(lambda _: source.u64()), _U32(lambda _: source.u32()),
                           _DOUBLE(lambda _: source.double()))
        self._bitgen = _BitGen(None, self._callbacks[0], self._callbacks[1], self._callbacks[2], self._callbacks[0])
        self.capsule = _capsule_new(ctypes.addressof(self._bitgen), _CAPSULE_NAME, None)


_SOURCE: ContextVar[ReplaySource | None] = ContextVar("shoal_device_random", default=None)


def generator() -> np.random.Generator:
    """The device's Generator: OS entropy, or the replayed bytes inside ``replay``."""
    source = _SOURCE.get()
    if source is None:
        return np.random.default_rng(np.random.SeedSequence())  # device-private: 128 bits from secrets
    return source.generator()


def token_bytes(n: int) -> bytes:
    """n private random bytes: OS entropy, or the next n replayed bytes inside ``replay``."""
    source = _SOURCE.get()
    return secrets.token_bytes(n) if source is None else source.token_bytes(n)


@contextmanager
def replay(data: bytes) -> Iterator[ReplaySource]:
    """Within the block, every private read of this thread (context) comes from
    ``data`` in order: conformance vectors and tests only, never a real device.
    Raises ReplayError at the end if the device read past the end of ``data``."""
    source = ReplaySource(data)
    token = _SOURCE.set(source)
    try:
        yield source
    finally:
        _SOURCE.reset(token)
    if source.overrun:
        raise ReplayError(f"the device read {source.position} private bytes; the replay holds {len(source.data)}")
