"""keep_freed_memory: blocks a training step frees stay in the process's heap."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from tui_lab.core.training.heap import MMAP_THRESHOLD

# In a fresh interpreter (the test process may have called it already): glibc's
# mallinfo2 counts the bytes of blocks it mapped on their own (``hblkhd``), the ones
# it hands back to the kernel when they are freed.
PROBE = f"""
import ctypes
from tui_lab.core.training.heap import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def mapped_by(size):
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    grown = libc.mallinfo2().hblkhd - before
    libc.free(block)
    return grown

# glibc maps a block of 1 MB by default (and then raises its bar to 1 MB); a step's
# 16 MB block, kept, comes from the heap.
print(mapped_by(2**20) >= 2**20, keep_freed_memory(), mapped_by({MMAP_THRESHOLD // 2}) > 0)
"""


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc"
)
def test_a_step_sized_block_comes_from_the_heap_once_kept() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    # Mapped on its own (and unmapped on free) before; from the heap, kept, after.
    assert out == ["True", "True", "False"]
