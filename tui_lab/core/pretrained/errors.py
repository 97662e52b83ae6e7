"""The error every pretrained-model reader raises: one line naming the file and the key at fault."""

from tui_lab.core.errors import LabError


class PretrainedError(LabError):
    """A model folder, cache entry or file the lab cannot read; ``str()`` is one line."""
