"""The final circuit over a run's history: each snapshot is measured with its own weights
(here one whose layer-1 heads write nothing, and the trained weights), the caller's model
untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from tests.cli.helpers import DATA
from tui_lab.core.analysis.edges.component_graph import EdgeError
from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
from tui_lab.core.analysis.edges.edges_history import edges_history
from tui_lab.core.analysis.edges.faithfulness import faithfulness
from tui_lab.core.analysis.patching.patch_pair import ready_pair
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.snapshots import History


def test_each_snapshot_measures_the_final_circuit_with_its_own_weights(tmp_path: Path) -> None:
    run = Path(shutil.copytree(DATA / "induction-run", tmp_path / "run"))
    lab = open_model(run)
    trained = {k: v.clone() for k, v in lab.model.state_dict().items()}
    history = History(run, RunFolder.read(run).preset_config, lab.model)
    with torch.no_grad():
        lab.model.decoder.layers[1].self_attn.w_o.weight.zero_()
    history.save(5)
    silenced = {k: v.clone() for k, v in lab.model.state_dict().items()}
    lab.model.load_state_dict(trained)
    history.save(2000)

    pair = ready_pair(lab)
    final = edge_attribution(lab, pair, "eap")
    want = faithfulness(lab, pair, final)
    lab.model.load_state_dict(silenced)
    silent = faithfulness(lab, pair, final)  # the final circuit on the step-5 weights
    lab.model.load_state_dict(trained)
    seen: list[tuple[int, int, str]] = []
    result = edges_history(lab, run, pair, final, percent=10.0, progress=lambda *a: seen.append(a))
    assert result.steps == [5, 2000] and [s[:2] for s in seen] == [(1, 2), (2, 2)]
    assert result.recovered[1] == pytest.approx(want.at(10.0), abs=1e-5)
    assert result.cpr[1] == pytest.approx(want.cpr, abs=1e-5)
    assert result.recovered[0] == pytest.approx(silent.at(10.0), abs=1e-5)
    assert result.cpr[0] == pytest.approx(silent.cpr, abs=1e-5)
    assert silent.clean != pytest.approx(want.clean, abs=1e-2)  # the snapshot differs
    for name, value in lab.model.state_dict().items():  # the caller's weights stay the final ones
        torch.testing.assert_close(value, trained[name])


def test_a_run_without_history_is_one_line() -> None:
    lab = open_model(DATA / "induction-run")
    pair = ready_pair(lab)
    with pytest.raises(EdgeError, match="no history snapshots"):
        edges_history(lab, DATA / "induction-run", pair, edge_attribution(lab, pair, "eap"))


def test_snapshots_that_do_not_tell_the_pair_apart_are_left_out_of_the_curve() -> None:
    from tui_lab.core.analysis.edges.edges_history import EdgesHistory

    h = EdgesHistory(20.0, [1, 50, 100, 2000], [-1.2, 0.7, 0.2, 0.9], [0.1] * 4, [0.2, -1.3, 2.0, 27.0], 27.0)
    assert h.readable() == ([100, 2000], [0.2, 0.9])  # 5% of 27 is 1.35: steps 1 and 50 are noise
    assert h.readable(0.0) == ([1, 50, 100, 2000], [-1.2, 0.7, 0.2, 0.9])
