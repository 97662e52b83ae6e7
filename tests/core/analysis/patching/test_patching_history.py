"""Patching over a run's history: each snapshot's grid is that snapshot's own patching
(here a snapshot whose layer-1 heads write nothing, and the trained weights); the
command's --at-step reads the same snapshots."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from tests.cli.helpers import DATA, tfx
from tui_lab.core.analysis.patching.activation_patching import activation_patch
from tui_lab.core.analysis.patching.patch_pair import ready_pair
from tui_lab.core.analysis.patching.patching_history import patch_history
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.snapshots import History


def test_each_snapshot_is_patched_with_its_own_weights(tmp_path: Path) -> None:
    run = Path(shutil.copytree(DATA / "induction-run", tmp_path / "run"))
    lab = open_model(run)
    trained = {k: v.clone() for k, v in lab.model.state_dict().items()}
    history = History(run, RunFolder.read(run).preset_config, lab.model)
    with torch.no_grad():
        lab.model.decoder.layers[1].self_attn.w_o.weight.zero_()
    history.save(5)
    lab.model.load_state_dict(trained)
    history.save(2000)

    pair = ready_pair(lab)
    want = activation_patch(lab, pair, "z")
    seen: list[tuple[int, int]] = []
    result = patch_history(lab, run, pair, "z", progress=lambda done, total: seen.append((done, total)))
    assert result.steps == [5, 2000] and seen == [(1, 2), (2, 2)]
    early, last = result.results
    torch.testing.assert_close(torch.tensor(last.raw), torch.tensor(want.raw), atol=1e-5, rtol=0)
    # layer 1 wrote nothing: patching it changes nothing (to float rounding, which differs between CPUs)
    assert all(abs(v - early.corrupt) < 1e-5 for v in early.raw[1])
    assert len(result.cell_curves()["L1:H2"]) == 2

    out = json.loads(tfx("patch", "--run", str(run), "--site", "z", "--at-step", "5", "--json").stdout)
    torch.testing.assert_close(torch.tensor(out["raw"]), torch.tensor(early.raw), atol=1e-5, rtol=0)
