"""The list of presets: the shipped ones, then the user's own folder."""

from __future__ import annotations

from pathlib import Path

from typing_extensions import Unpack

from tui_lab.core.config.presets import PresetInfo, list_presets
from tui_lab.ui.widgets.pick_list import Item, PickList
from tui_lab.ui.widgets.widget_options import WidgetOptions


class PresetList(PickList):
    """Shipped and user presets; Enter loads the highlighted one."""

    def __init__(self, user_dir: Path | None = None, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.user_dir = user_dir
        self.presets: list[PresetInfo] = []

    def on_mount(self) -> None:
        """Fill the list when the widget appears."""
        self.reload()

    def reload(self, select: str | Path | None = None) -> None:
        """Re-read both folders; highlight the preset named (or at the path) ``select``."""
        try:
            self.presets = list_presets(self.user_dir)
        except OSError:
            self.presets = []
        self.set_items(
            [
                Item(info.name, "" if info.shipped else "(yours)", info.description)
                for info in self.presets
            ]
        )
        if select is not None:
            self.highlight_preset(select)

    def highlight_preset(self, select: str | Path) -> None:
        """Move the highlight to a preset given by name or path."""
        for i, info in enumerate(self.presets):
            if str(select) in (info.name, str(info.path)) or (
                isinstance(select, Path) and select.resolve() == info.path.resolve()
            ):
                self.highlighted = i
                return

    def preset_at(self, index: int | None) -> PresetInfo | None:
        """The preset shown at ``index`` (None if out of range)."""
        if index is None or not 0 <= index < len(self.presets):
            return None
        return self.presets[index]
