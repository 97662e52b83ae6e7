"""BatchTopK and Matryoshka SAE folders in Runs and TensorBoard: the row names the architecture they
were trained as (not the ``jumprelu`` they are written as) with its k and prefix widths, and every
figure of the row and of the export equals the folder's own ``metrics.jsonl``, read here line by line.

The folders are written by the lab's SAE trainer (a few steps on planted activations).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.sae.planted import D_SAE, WIDTHS, K, fresh_sae, planted_rows
from tui_lab.core.runs.summary import summarize_runs
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.trainer import SAETrainer

ARCHS = ("batchtopk", "matryoshka_batchtopk")
HOOK = "blocks.0.hook_resid_post"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("batchtopk-runs")
    settings = TrainSettings(tokens=768, batch_size=64, buffer_rows=256, lr=1e-3, dead_window=256, log_every=3)
    for arch in ARCHS:
        sae = fresh_sae(arch)
        sae.cfg.metadata.hook_name, sae.cfg.metadata.model_name = HOOK, "runs/induction"
        SAETrainer(sae, settings, out / arch).train(iter([planted_rows(1024, seed=3)]))
    return out


def _steps(folder: Path) -> list[dict]:
    records = map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())
    return [r for r in records if r["kind"] == "step"]


def test_rows_name_what_they_were_trained_as_with_the_last_figures(root: Path) -> None:
    rows = {Path(r.path).name: r for r in summarize_runs(root)}
    for arch in ARCHS:
        row, folder = rows[arch], root / arch
        cfg = json.loads((folder / "cfg.json").read_text())
        assert cfg["architecture"] == "jumprelu"  # written for inference as SAELens writes it
        assert (row.kind, row.preset, row.status, row.step, row.total_steps) == ("sae", f"sae {arch}", "finished",
                                                                                   12, 12)
        expected = {"arch": arch, "d_sae": D_SAE, "k": K, "hook": HOOK, "model": "runs/induction"}
        if arch == "matryoshka_batchtopk":
            expected["widths"] = WIDTHS
        assert row.diff == expected
        last = _steps(folder)[-1]
        assert (row.explained_variance, row.l0, row.dead_fraction) == (
            last["explained_variance"], last["l0"], last["dead_fraction"])
        assert f"k={K}" in row.label and arch in row.label


@pytest.mark.parametrize("arch", ARCHS)
def test_exported_like_a_topk_sae(root: Path, tmp_path: Path, arch: str) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tui_lab.core.runs.tensorboard_export import export_run

    folder = root / arch
    result = export_run(folder, tmp_path / "tb")
    events = EventAccumulator(str(result.folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    steps = _steps(folder)
    for name in ("loss", "mse", "l0", "explained_variance", "fvu", "dead_fraction", "lr"):
        points = events.Scalars(f"sae/{name}")
        assert [p.step for p in points] == [r["step"] for r in steps] == [3, 6, 9, 12]
        assert [p.value for p in points] == pytest.approx([r[name] for r in steps], rel=1e-6, abs=1e-9)
    assert not any(tag.startswith("crosscoder/") for tag in events.Tags()["scalars"])
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text.startswith(f"an SAE, trained as {arch}") and f'"training_architecture": "{arch}"' in text
