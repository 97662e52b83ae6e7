"""The five panes built after the first frame, each behind a ``LazyPane`` stand-in.

Only the Build pane is imported before the first frame; the others (and
plotext, which the Train pane needs) are imported and built after it: in the
lab, once torch (and a ``--model``) is loaded, or as soon as one is shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.ui.state.lab_state import LabState
from tui_lab.ui.widgets.lazy_pane import LazyPane
from tui_lab.ui.widgets.pane_tabs import pane_widget_id

if TYPE_CHECKING:
    from tui_lab.ui.panes.attention.attention_pane import AttentionPane
    from tui_lab.ui.panes.decode.decode_pane import DecodePane
    from tui_lab.ui.panes.features.features_pane import FeaturesPane
    from tui_lab.ui.panes.params.params_pane import ParamsPane
    from tui_lab.ui.panes.patch.patch_pane import PatchPane
    from tui_lab.ui.panes.runs.runs_pane import RunsPane
    from tui_lab.ui.panes.train.train_pane import TrainPane


def lazy_panes(
    state: LabState, run_dir: Path | None, follow: bool, held: bool = False
) -> list[LazyPane]:
    """Stand-ins for Train, Decode, Attention, Params and Runs, in tab order; Train opens
    ``run_dir`` (or follows it, ``follow``). ``held``: hidden ones wait for ``LazyPane.release``."""

    def train() -> TrainPane:
        from tui_lab.ui.panes.train.train_pane import TrainPane

        return TrainPane(
            state.config,
            state.runs_root,
            open_dir=run_dir if not follow else None,
            follow_dir=run_dir if follow else None,
            id=pane_widget_id("train"),
        )

    def decode() -> DecodePane:
        from tui_lab.ui.panes.decode.decode_pane import DecodePane

        return DecodePane(id=pane_widget_id("decode"))

    def attention() -> AttentionPane:
        from tui_lab.ui.panes.attention.attention_pane import AttentionPane

        return AttentionPane(id=pane_widget_id("attention"))

    def params() -> ParamsPane:
        from tui_lab.ui.panes.params.params_pane import ParamsPane

        return ParamsPane(id=pane_widget_id("params"))

    def runs() -> RunsPane:
        from tui_lab.ui.panes.runs.runs_pane import RunsPane

        return RunsPane(state.runs_root, id=pane_widget_id("runs"))

    def features() -> FeaturesPane:
        from tui_lab.ui.panes.features.features_pane import FeaturesPane

        return FeaturesPane(id=pane_widget_id("features"))

    def patch() -> PatchPane:
        from tui_lab.ui.panes.patch.patch_pane import PatchPane

        return PatchPane(id=pane_widget_id("patch"))

    return [
        LazyPane(factory, id=pane_widget_id(name), held=held)
        for name, factory in (
            ("train", train),
            ("decode", decode),
            ("attention", attention),
            ("params", params),
            ("runs", runs),
            ("patch", patch),
            ("features", features),
        )
    ]
