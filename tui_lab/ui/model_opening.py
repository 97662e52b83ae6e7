"""Opening a real model from files (``tfx-lab --model SOURCE``), in torch's loading thread.

The thread that imported torch (``app._load_core_worker``) goes straight on to
open the model (``core.opening.model_in_hand.open_model``: the files are
memory-mapped, the lab's own model is built around them) and posts one
``ModelOpened`` message, which the app routes to every pane: the model is
usable from then on. What makes decoding faster but is not needed to start is
done after that message, in the same thread: re-laying the weights for
decoding (``ModelInHand.settle``; work in torch, so the UI keeps its
interpreter lock meanwhile), then reading the mapped pages once.
A daemon thread, for the reason torch's import is one: opening cannot be
interrupted, and quitting while it runs must not wait for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import App

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import ModelOpened

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.pretrained.widening import Widening


def open_and_post(
    app: App[Any], source: str, revision: str | None, dtype: str = "float32", widening: Widening | None = None
) -> None:
    """Open ``source`` (a folder or a cached hub name) in this thread, in ``dtype``, with
    the float32 copies ``widening`` made meanwhile (if any); ``ModelOpened`` reports it."""
    from tui_lab.core.errors import LabError
    from tui_lab.core.opening.model_in_hand import is_run_folder, open_model

    try:
        if is_run_folder(source):  # --model is a model's files; a run has --run
            raise LabError(f"{source}: a run folder, not a model's files: pass it as --run")
        loaded = open_model(source, revision=revision, dtype=dtype, lay_out_later=True, widening=widening)
    except Exception as exc:  # noqa: BLE001 - one line in the lab, which stays usable
        app.post_message(ModelOpened(source, None, one_line(exc)))
        return
    app.post_message(ModelOpened(source, loaded))
    loaded.settle()
    # The weights are mapped, not read: read their pages now, while the user
    # types, so the first decode does not wait on the disk.
    prefetch(loaded.model)


def prefetch(model: nn.Module) -> None:
    """Touch every weight once (one read per page of the mapped files)."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.sum()
