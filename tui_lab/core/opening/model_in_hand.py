"""``open_model(source)``: any model the lab opens, with its tokenizer and its hook points.

For notebooks and scripts, as researchers use TransformerLens::

    from tui_lab.core import open_model

    lab = open_model("runs/induction-2026...")      # a run folder, a model folder, a hub name
    logits, cache = lab.run_with_cache("abcabc", names=lambda n: n.endswith("hook_pattern"))
    cache["blocks.1.attn.hook_pattern"].shape        # (1, heads, pos, pos)

    def no_head_2(z, name):                          # (batch, pos, head, d_head)
        z = z.clone(); z[:, :, 2] = 0; return z
    logits = lab.run_with_hooks("abcabc", hooks=[("blocks.1.attn.hook_z", no_head_2)])

Each call makes its hooks active for itself alone (``hook_points.using_hooks``):
two threads may call one handle at once, and nothing is left on the model.
An encoder-decoder reads the text as its source; its decoder input is the
start token unless ``target`` (text or ids) is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.opening.in_hand import HookError, ModelInHand, Names, TokensLike
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.run_files import CONFIG_FILE

if TYPE_CHECKING:
    from tui_lab.core.pretrained.widening import Widening

__all__ = ["HookError", "ModelInHand", "Names", "TokensLike", "is_run_folder", "open_model"]


def is_run_folder(source: str | Path) -> bool:
    """Whether ``source`` is a folder of the lab's runs (it holds ``config.yaml``)."""
    return (Path(source) / CONFIG_FILE).is_file()


def open_model(
    source: str | Path | RunFolder,
    *,
    at_step: int | None = None,
    revision: str | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    lay_out_later: bool = False,
    widening: Widening | None = None,
) -> ModelInHand:
    """The model ``source`` names: a run folder (read or not; ``at_step``: its history snapshot of that
    step), a model folder or a hub name in the local cache (offline, as ``--model``;
    ``revision``: a branch or commit of the cached model; ``dtype``: float32, exact, or
    bfloat16, as stored). LabError (one line) if it cannot be opened.

    For a model from files, ``lay_out_later`` returns before its weights are re-laid
    for decoding (``settle()`` does it) and ``widening`` hands float32 copies begun
    before torch was imported: the lab's ``--model`` start-up.
    """
    if isinstance(source, RunFolder) or is_run_folder(source):
        from tui_lab.core.opening.from_run import load_for_inference

        if revision is not None:
            raise HookError("a revision goes with a model from the hub cache, not a run folder")
        return load_for_inference(source, device, at_step)
    if at_step is not None:
        raise HookError(f"{source}: not a run folder, so it has no history for at_step")
    from tui_lab.core.opening.from_files import open_files

    return open_files(
        str(source), device, revision, lay_out_later=lay_out_later, dtype=dtype, widening=widening
    )
