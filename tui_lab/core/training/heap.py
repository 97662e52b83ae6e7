"""The C heap of a process that trains: memory a step frees is kept for the next one.

A training step allocates its activations and gradients (megabytes each) and frees
them before the next step allocates the same sizes again. glibc's malloc hands
blocks of a few megabytes back to the kernel, by ``munmap`` or by trimming the top of
the heap, and the next step's first touch of each page faults it in afresh: on the
char-lm preset, 1,800 to 5,200 page faults a step, which made a step's time vary by
a third between runs and cost 3-5% of a ``tfx-lab train`` (sys time 2.4 s against
0.7 s over 150 steps). With blocks under 32 MB served from the heap and up to 512 MB
of free heap kept, a step faults some 25 pages.
"""

from __future__ import annotations

import ctypes
import sys

# mallopt's parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's ceiling for the mmap threshold on a 64-bit machine: larger blocks (a big
# model's weights, a long batch) are still mapped and returned whole.
MMAP_THRESHOLD = 32 * 2**20
# Free memory at the heap's top kept rather than returned: more than a small model's
# step allocates, bounded by the process's own peak.
TRIM_THRESHOLD = 512 * 2**20

_kept = False


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed blocks in this process (and in the processes
    it forks). Once per process; False where the C library has no ``mallopt`` (macOS,
    Windows, musl) or refuses, and nothing changes there."""
    global _kept
    if _kept or not sys.platform.startswith("linux"):
        return _kept
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _kept = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    _kept = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and _kept
    return _kept
