"""Keep freed block buffers in the process (glibc), for block-by-block numpy
work such as ``shoal simulate`` (issue 42: the encoder's time went a quarter
to page faults).

The simulator encodes devices in blocks of ~21,000 rows; each block's
n x d temporaries (~17 MB at d = 100) are above glibc's default mmap
threshold, so every one is a fresh ``mmap`` whose pages fault in on first
touch and go back to the OS on ``free``: at 1e6 x 100 that was ~1 s of a
3.7 s encode. Raising the mmap threshold to its cap (32 MiB on 64-bit) and
the trim threshold keeps those buffers in the heap, reused block after
block; the peak is unchanged (measured: VmHWM 990 -> 976 MB), only memory
freed by a block is not handed back until the process ends.

Called by the ``shoal simulate`` command, not by the library: it is a
process-wide setting, the command's process is the simulator's own.
Nothing happens outside Linux with glibc (musl has no ``mallopt``).
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_CAP = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 1 << 30


def keep_block_buffers() -> bool:
    """Apply the two settings; False (and nothing changed) where they do not exist."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_CAP)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
