"""Transcoders, the lab's face: ``Transcoder`` and ``TranscoderSet`` (``transcoder_layers.py``,
where the maths and the orientation are written out) and their files both ways
(``transcoder_files.py``: circuit-tracer's transcoder-set folder, SAELens's per-layer folders).

    tset = open_transcoders("sets/induction", model)   # checked to fit the model
    acts = tset[0].encode(x)                            # (..., d_tc)
    save_transcoders(tset, "sets/copy", format="saelens")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.sae.transcoder_files import read_transcoder_set, write_transcoder_set
from tui_lab.core.sae.transcoder_layers import (
    ARCHITECTURES,
    DEFAULT_INPUT_HOOK,
    DEFAULT_OUTPUT_HOOK,
    Transcoder,
    TranscoderSet,
)

if TYPE_CHECKING:
    from tui_lab.core.sae.activations import HookedLike

__all__ = ["ARCHITECTURES", "DEFAULT_INPUT_HOOK", "DEFAULT_OUTPUT_HOOK", "Transcoder", "TranscoderSet",
           "open_transcoders", "save_transcoders"]


def open_transcoders(path: str | os.PathLike[str], model: HookedLike | None = None) -> TranscoderSet:
    """The transcoder set in ``path`` (circuit-tracer's folder or SAELens's per-layer folders);
    with ``model``, checked to fit it. SAEError (one line) on anything wrong; nothing written."""
    return read_transcoder_set(Path(path).expanduser(), model)


def save_transcoders(tset: TranscoderSet, path: str | os.PathLike[str], format: str = "circuit-tracer") -> Path:
    """Write ``tset`` to the folder ``path`` in ``format`` ('circuit-tracer' or 'saelens'); the folder."""
    return write_transcoder_set(tset, Path(path).expanduser(), format)
