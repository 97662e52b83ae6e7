"""Opening a real model from files (``tfx-lab --model SOURCE``) in the background.

Torch is loaded first (``core_access``), after the first frame; then a daemon
thread opens the model (``core.decoding.opened.open_model``: the files are
memory-mapped, the lab's own model is built around them) and posts one
``ModelOpened`` message, which the app routes to every pane. A daemon thread,
not a Textual worker, for the reason torch's import is one: opening cannot be
interrupted, and quitting while it runs must not wait for it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import ModelOpened

if TYPE_CHECKING:
    from tui_lab.ui.app import LabApp


def open_in_background(app: LabApp, source: str, revision: str | None) -> threading.Thread:
    """Start opening ``source`` (a folder or a cached hub name); ``ModelOpened`` reports it."""

    def run() -> None:
        from tui_lab.core.decoding.opened import open_model

        try:
            loaded = open_model(source, "cpu", revision)
        except Exception as exc:  # noqa: BLE001 - one line in the lab, which stays usable
            app.post_message(ModelOpened(source, None, one_line(exc)))
            return
        app.post_message(ModelOpened(source, loaded))
        # The weights are mapped, not read: read their pages now, while the user
        # types, so the first decode does not wait on the disk.
        prefetch(loaded.model)

    thread = threading.Thread(target=run, name="tfx-lab-open-model", daemon=True)
    thread.start()
    return thread


def prefetch(model: object) -> None:
    """Touch every weight once (one read per page of the mapped files)."""
    import torch

    with torch.no_grad():
        for p in model.parameters():  # type: ignore[attr-defined]
            p.sum()


def model_label(loaded: object) -> str:
    """How the Decode and Attention panes name an opened model: ``gpt2 (family gpt2, from files)``."""
    card = getattr(loaded, "card", None)
    name = loaded.config.name  # type: ignore[attr-defined]
    return f"{name} ({card.family}, opened from files)" if card is not None else name
