"""The error every SAE reader, writer and trainer raises: one line naming the file and the fault."""

from tui_lab.core.errors import LabError


class SAEError(LabError):
    """An SAE folder, cfg.json or weights file the lab cannot use; ``str()`` is one line."""
