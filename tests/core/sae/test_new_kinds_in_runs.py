"""BatchTopK and Matryoshka SAE folders are rows of the runs table under the kind they were trained as,
and export to TensorBoard like any SAE's (the folders written by the trainer itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.sae.planted import fresh_sae, planted_rows
from tui_lab.core.runs.summary import summarize_runs
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.trainer import SAETrainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kinds")
    settings = TrainSettings(tokens=1024, batch_size=128, buffer_rows=512, lr=1e-3, dead_window=512, log_every=2)
    for arch in ("batchtopk", "matryoshka_batchtopk", "topk"):
        sae = fresh_sae(arch)
        sae.cfg.metadata.hook_name = "blocks.1.hook_resid_post"
        SAETrainer(sae, settings, root / arch).train(iter([planted_rows(2048, seed=1)]))
    return root


def test_each_kind_is_a_row_named_as_trained(runs: Path) -> None:
    rows = {Path(r.path).name: r for r in summarize_runs(runs)}
    assert {name: rows[name].preset for name in rows} == {
        "batchtopk": "sae batchtopk", "matryoshka_batchtopk": "sae matryoshka_batchtopk", "topk": "sae topk"}
    for row in rows.values():
        assert row.kind == "sae" and row.status == "finished" and row.step == 8
        assert row.explained_variance is not None and row.l0 is not None
    assert rows["matryoshka_batchtopk"].diff["widths"] == [8, 24, 64]
    assert rows["batchtopk"].diff["arch"] == "batchtopk" and rows["batchtopk"].diff["k"] == 2


def test_exported_to_tensorboard_like_the_others(runs: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tui_lab.core.runs.tensorboard_export import export_run

    for arch in ("batchtopk", "matryoshka_batchtopk"):
        result = export_run(runs / arch, tmp_path / arch)
        events = EventAccumulator(str(result.folder), size_guidance={"scalars": 0, "tensors": 0})
        events.Reload()
        assert {"sae/loss", "sae/explained_variance", "sae/l0"} <= set(events.Tags()["scalars"])
        text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
        assert f'"training_architecture": "{arch}"' in text
