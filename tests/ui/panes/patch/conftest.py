"""The Patch pane's hosts: the fake host with the pane's stylesheet and a model in hand."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.ui.fake_host import STYLES, FakeHost
from tui_lab.ui.panes.patch.patch_pane import PatchPane

PANE_CSS = Path(__file__).resolve().parents[4] / "tui_lab" / "ui" / "panes" / "patch" / "patch.tcss"
INDUCTION_RUN = Path(__file__).resolve().parents[3] / "data" / "induction-run"
# A tiny induction run with a history (two layers, so z has heads in both; a few steps).
HISTORY_PRESET = """\
model: {arch: decoder-only, n_encoder_layers: 0, n_decoder_layers: 2, d_model: 32, n_heads: 2,
        d_ff: 0, positional: learned, max_len: 64}
task: {name: induction}
train: {steps: 12, batch_size: 8, eval_every: 6, eval_examples: 16, device: cpu, threads: 1,
        history_every: 4}
"""


class PatchHost(FakeHost):
    """The fake host with the Patch pane's stylesheet, and ``run`` in hand."""

    def __init__(self, pane: PatchPane, runs_root: Path, run: Any) -> None:
        super().__init__(lambda: pane, "patch", runs_root)
        self.css_path = [STYLES / "app.tcss", PANE_CSS]
        self.state.current_run = run


def in_hand(run_dir: Path) -> Any:
    """The run loaded as the lab holds an opened run: its model, task, config and folder."""
    from tui_lab.core.opening.from_run import load_for_inference

    run = load_for_inference(run_dir, "cpu")
    # what the lab's opened runs carry: RemoteRun.out_dir
    return SimpleNamespace(model=run.model, task=run.task, config=run.config, card=None, step=run.step, out_dir=run_dir)


@pytest.fixture(scope="session")
def history_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny induction run trained with history snapshots every 4 steps."""
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.train import TrainingRun

    root = tmp_path_factory.mktemp("patch-history-run")
    (root / "tiny.yaml").write_text(HISTORY_PRESET)
    TrainingRun(load_preset(str(root / "tiny.yaml")), root / "run").run()
    return root / "run"
