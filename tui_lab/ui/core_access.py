"""Loads torch and the core in the background, after the first frame is on screen.

Nothing under ``tui_lab.ui`` imports torch when it is imported, so the first
frame never waits for it. ``load_core()`` runs in a thread: it imports torch
and the core modules the lab calls, and returns a ``Core``. From then on a
pane imports what it calls by name, inside the function that calls it
(``from tui_lab.core.decoding.decode import generate``): the module is loaded already,
so that costs nothing, and readers and tools can follow the call.
"""

from __future__ import annotations

import gc
import warnings

FULL_GC_EVERY = 100  # middle-generation collections per full one (Python's default: 10)


class Core:
    """The loaded core: torch and the core modules the panes use are imported (so a pane's own
    import of them later is instant); ``version`` is torch's, for the status bar."""

    def __init__(self) -> None:
        # A CPU torch without numpy warns on import; the lab never needs numpy.
        warnings.filterwarnings("ignore", message=".*NumPy.*")
        import torch

        # Imported here, in torch's loading thread, for the panes that import them on use.
        import tui_lab.core.decoding.decode
        import tui_lab.core.model.params
        import tui_lab.core.runs.checkpoint
        import tui_lab.core.tasks
        import tui_lab.core.training.remote
        import tui_lab.core.training.train  # noqa: F401

        self.version = torch.__version__.split("+")[0]


def load_core() -> Core:
    """Import torch and the core modules the lab needs (a second or two; call it in a thread).

    No optimizer is made here: runs train in their own processes (``core.training.remote``),
    forked from a server that has made one already.

    The cyclic collector is off meanwhile (for the whole process): torch's import
    creates some 170,000 objects, and the full collections they set off walked a
    heap that kept growing, a tenth to a quarter of a second of the interpreter
    lock in all. The objects are frozen afterwards (``keep_collections_short``)
    rather than collected, before the collector is on again.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        core = Core()
        keep_collections_short()
        return core
    finally:
        if was_enabled:
            gc.enable()


_frozen = False  # torch's objects are frozen once per process


def keep_collections_short() -> None:
    """Once torch is loaded, keep garbage collection from pausing the UI (``load_core``
    calls it, in torch's loading thread, before a model is built).

    torch brings hundreds of thousands of long-lived objects; a full collection
    walking them all paused the UI for hundreds of milliseconds now and then.
    Frozen, they are left out of every later collection. Even so, a full
    collection walked the UI's own objects for ~15 ms, about every fifth pane
    switch; a tenth as many full collections keeps that pause out of almost
    every key press, and cyclic garbage waits a little longer.
    Frozen once per process: a later lab in the same process (tests open
    hundreds) finds torch already frozen.
    Frozen without a collection first: after torch's import one found 40
    unreachable objects among 170,000 and took 0.13-0.3 s of the interpreter
    lock, right when the lab becomes usable (and with the collector off during
    the import, every one of them is in the youngest generation).
    """
    global _frozen
    if not _frozen:
        gc.freeze()
        _frozen = True
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_GC_EVERY)
