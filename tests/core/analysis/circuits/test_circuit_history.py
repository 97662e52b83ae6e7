"""The graph over a run's history: a folder of ``step_<N>`` transcoder sets, the set for a
step (refused in one line when that step has none), and the graph traced at a step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.analysis.circuits.conftest import PROMPT, random_transcoders
from tui_lab.core.analysis.circuits.graph_history import graph_at, history_steps, set_folder
from tui_lab.core.errors import LabError
from tui_lab.core.sae.transcoder import save_transcoders


def test_steps_sets_and_graph_at_a_step(gpt2, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, model, _ = gpt2
    for step, seed in ((30, 0), (7, 1)):
        save_transcoders(random_transcoders(model, seed=seed), tmp_path / f"step_{step}")
    (tmp_path / "notes").mkdir()
    assert history_steps(tmp_path) == [7, 30]
    assert set_folder(tmp_path, 7) == tmp_path / "step_7"
    with pytest.raises(LabError, match="no transcoders for step 8"):
        set_folder(tmp_path, 8)
    with pytest.raises(LabError, match="--at-step"):
        set_folder(tmp_path, None)
    assert set_folder(tmp_path / "step_7", None) == tmp_path / "step_7"  # a single set
    opened: list[int | None] = []

    def open_at(step: int | None) -> object:
        opened.append(step)
        return model

    found = graph_at(open_at, tmp_path, 30, PROMPT, None, lambda *a: None, lambda: False)  # type: ignore[arg-type]
    assert opened == [30] and found.step == 30
    assert found.graph.n_features > 0 and found.graph.feature_labels  # kept features labelled
