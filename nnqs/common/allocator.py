"""Keep freed memory in the process instead of handing it back to the OS (glibc).

Why: glibc serves every allocation above its mmap threshold (at most 32 MiB)
with a fresh ``mmap`` and returns it with ``munmap`` on free, so each VMC step
page-faults and zero-fills its large tensors (Jacobian, connected
configurations, sampler buffers) again. Measured with ``python -m
benchmarks.allocator`` (fresh ``nnqs vmc`` processes, one thread): LiH 60
steps 32.9 s -> 18.0 s (kernel time 15.1 s -> 0.46 s), H2O 30 steps 36.1 s ->
21.0 s, identical energies, peak RSS 1,156 -> 1,182 MB.

:func:`reuse_freed_memory` turns ``mmap`` chunks off and raises the trim
threshold, so freed blocks are reused by the next step. The command line calls
it at start; ``NNQS_MALLOC=system`` keeps glibc's defaults. Elsewhere (macOS,
musl) it does nothing.
"""
from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_MAX = -4


def reuse_freed_memory() -> bool:
    """Set glibc's malloc to keep and reuse freed memory; return whether it took effect."""
    if os.environ.get("NNQS_MALLOC", "").strip().lower() == "system":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
