"""Loads the torch-backed core modules; called from a thread worker after the first paint.

The UI never imports these at module level, so the first frame does not wait
for torch. ``load_core()`` returns a namespace the panes use once it arrives.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace


def load_core() -> SimpleNamespace:
    """Import torch and the core modules the lab needs (takes a second or two)."""
    # A CPU torch without numpy warns on import; the lab never needs numpy.
    warnings.filterwarnings("ignore", message=".*NumPy.*")
    import torch

    from tui_lab.core import checkpoint, decode, params, run_process, tasks, train

    # The first optimizer pulls in more of torch (seconds on a slow machine):
    # do it now, in the background, so pressing space starts training promptly.
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])

    return SimpleNamespace(
        torch=torch,
        checkpoint=checkpoint,
        decode=decode,
        params=params,
        run_process=run_process,
        tasks=tasks,
        train=train,
    )
