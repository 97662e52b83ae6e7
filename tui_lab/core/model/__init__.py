"""The Transformer itself: attention, positions, layers, models, capture, parameter counts, device.

Importing the package registers the encoder-only shape with ``models.build_model``
(``encoder_only.py`` builds on ``models.py``'s pieces, so ``models`` cannot import it).
"""

from tui_lab.core.model import encoder_only as _encoder_only  # noqa: F401 - registers "encoder-only"
