"""Where the lab's keys live: the panes, and the classes whose ``BINDINGS`` act in each.

The help screen and the command palette are both built from this table and the
bindings themselves, so a key is written once, on the widget that owns its action.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.binding import Binding

PANES = ("build", "train", "decode", "attention", "params", "runs")
PANE_TITLES = {
    "build": "Build",
    "train": "Train",
    "decode": "Decode",
    "attention": "Attention",
    "params": "Params",
    "runs": "Runs",
}


@dataclass(frozen=True)
class PaneKeys:
    """A pane's actions (its class's ``BINDINGS``) and the widgets in it with keys of their own."""

    pane: str
    owner: type
    widgets: tuple[tuple[str, type], ...] = field(default=())  # (help section title, class)

    @property
    def title(self) -> str:
        """The pane's name as the tab bar shows it ("Build")."""
        return PANE_TITLES[self.pane]

    @property
    def number(self) -> int:
        """The key that shows the pane (1-6)."""
        return PANES.index(self.pane) + 1


def pane_keys() -> list[PaneKeys]:
    """Every pane's keys, in tab order (the panes are imported here: after the first frame)."""
    from tui_lab.ui.panes.attention.attention_pane import AttentionPane
    from tui_lab.ui.panes.build.build_pane import BuildPane
    from tui_lab.ui.panes.build.config_form import ConfigForm
    from tui_lab.ui.panes.decode.decode_pane import DecodePane
    from tui_lab.ui.panes.params.params_pane import ParamsPane
    from tui_lab.ui.panes.runs.runs_pane import RunsPane
    from tui_lab.ui.panes.train.train_pane import TrainPane
    from tui_lab.ui.screens.fourier import FourierScreen
    from tui_lab.ui.widgets.heatmap import Heatmap

    return [
        PaneKeys("build", BuildPane, (("the form", ConfigForm),)),
        PaneKeys("train", TrainPane, (("the Fourier view (f)", FourierScreen),)),
        PaneKeys("decode", DecodePane),
        PaneKeys("attention", AttentionPane, (("", Heatmap),)),
        PaneKeys("params", ParamsPane),
        PaneKeys("runs", RunsPane),
    ]


def bindings_of(cls: type) -> list[Binding]:
    """A class's ``BINDINGS`` as Binding objects (tuples are allowed there too)."""
    return [b if isinstance(b, Binding) else Binding(*b) for b in getattr(cls, "BINDINGS", [])]


def first_key(binding: Binding) -> Binding:
    """``binding`` with only its first key ("i,slash" -> "i"), for showing one key."""
    key = binding.key.split(",")[0].strip()
    return Binding(key, binding.action, binding.description, binding.show, binding.key_display)


def action_help(owner: type, action: str) -> str:
    """The first line of the docstring of the method an action runs ("cycle_kind(1)"), no stop."""
    method = getattr(owner, f"action_{action.split('(')[0]}", None)
    doc = (getattr(method, "__doc__", None) or "").strip()
    return doc.splitlines()[0].rstrip(".") if doc else ""
