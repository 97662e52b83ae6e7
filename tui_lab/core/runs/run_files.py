"""What a run folder is made of: its file names, and the one error its failures raise.

Layout of a run folder::

    config.yaml        every setting (LabConfig.to_yaml(full=True))
    model.safetensors  weights (safetensors save_model: tied weights stored once)
    optimizer.pt       AdamW state; read only with torch.load(weights_only=True)
    state.json         step, timings, best accuracy, ... plus a "checkpoint" record
    metrics.jsonl      one JSON object per line, appended
    log.txt            timestamped lines of what happened

Kept free of torch so that naming, reading and listing run folders stays cheap.
"""

from __future__ import annotations

import os
import re

from tui_lab.core.errors import LabError, one_line

CONFIG_FILE = "config.yaml"
WEIGHTS_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
STATE_FILE = "state.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "log.txt"

RunDir = str | os.PathLike[str]

# Terminal styling and control characters (torch's weights-only error carries some).
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x1f\x7f]")


class RunError(LabError):
    """A run folder or file the lab cannot save or load; ``str()`` is one line for the user."""


def reason(exc: BaseException) -> str:
    """A short reason for a one-line message ("No space left on device", ...)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror  # without the errno and file name the message already gives
    if isinstance(exc, ModuleNotFoundError) and exc.name == "numpy":
        return "numpy is missing (safetensors needs it to save torch tensors; pip install numpy)"
    first = _CONTROL.sub("", one_line(exc))[:200]
    return first or type(exc).__name__
