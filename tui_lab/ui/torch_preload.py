"""Maps torch's C++ library on the second core while the lab draws its first frame.

``import torch`` spends its first half second in the dynamic loader: mapping
``libtorch_cpu.so`` (hundreds of MB), relocating it and running its static
constructors. An extension import does that holding the interpreter lock, so
nothing else in the lab runs meanwhile. Called through libc's ``dlopen`` by
ctypes, the same work runs without the lock, on another core, while the UI
composes and paints. When torch is imported later, the loader finds the
library already there and skips it.

glibc holds its own loader lock for the whole ``dlopen``: any extension module
the UI imported in that time would wait for it. So this starts only once the
lab's modules are imported (``cli.lab`` calls it just before the app runs), and
imports first the few extension modules the first frame still loads lazily.

Everything here is best effort: a library that is missing, or one that will not
load on its own (a CUDA build whose libraries torch finds its own way), leaves
the import to do it as it always did. Nothing is imported from torch itself.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from pathlib import Path

LIBRARY = "libtorch_cpu.so"  # present in every build; the CUDA one needs no more than torch finds itself


def library_path() -> Path | None:
    """Where torch's C++ library lies, found without importing torch (None: not found)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "lib" / LIBRARY
    return path if path.is_file() else None


def _load(path: Path) -> None:
    libc = ctypes.CDLL(None)  # the process's own symbols: libc's dlopen
    dlopen = libc.dlopen
    dlopen.restype = ctypes.c_void_p
    dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    # A foreign call through ctypes.CDLL releases the interpreter lock for its duration.
    # The handle is kept open on purpose: the library stays mapped for torch's import.
    dlopen(os.fsencode(path), os.RTLD_NOW)


def start() -> threading.Thread | None:
    """Start mapping torch's library in a daemon thread (None when there is nothing to map)."""
    path = library_path()
    if path is None or not hasattr(os, "RTLD_NOW"):
        return None
    # Extension modules the first frame imports on its way: imported now, they do
    # not queue behind the loader lock while the library maps.
    import queue  # noqa: F401 - _queue, for Textual's driver thread
    import termios  # noqa: F401 - the terminal driver

    thread = threading.Thread(target=_load, args=(path,), name="tfx-lab-map-torch", daemon=True)
    thread.start()
    return thread
