"""An SAE's training folder is a run like any other: a row of the runs table, and TensorBoard export.

The folder is written by the SAE trainer itself (on synthetic activations),
so the table reads what ``tfx-lab sae train`` writes, not a hand-made copy.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.core.sae.synthetic import ACTIVE, D_IN, dictionary, documents
from tui_lab.core.runs.summary import CSV_COLUMNS, csv_row, summarize_run, summarize_runs
from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.trainer import SAETrainer

D_SAE = 64


def _train(out: Path, tokens: int = 4096) -> None:
    cfg = SAEConfig(d_in=D_IN, d_sae=D_SAE, architecture="topk", k=ACTIVE)
    cfg.metadata.hook_name, cfg.metadata.model_name = "blocks.1.hook_resid_post", "runs/char"
    settings = TrainSettings(tokens=tokens, batch_size=128, buffer_rows=1024, lr=3e-3, log_every=4,
                             checkpoint_every=8)
    SAETrainer(SparseAutoencoder(cfg, seed=0), settings, out).train(documents(dictionary(), 10**9))


@pytest.fixture(scope="module")
def sae_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "sae-topk"
    _train(out)
    return out


def _records(run: Path, kind: str) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_a_finished_sae_is_a_row_with_its_figures(sae_run: Path) -> None:
    row = summarize_run(sae_run)
    last = _records(sae_run, "step")[-1]
    assert (row.kind, row.task, row.status, row.preset) == ("sae", "sae", "finished", "sae topk")
    assert (row.step, row.total_steps) == (32, 32)  # 4096 tokens in batches of 128
    assert row.diff == {"arch": "topk", "d_sae": D_SAE, "k": ACTIVE, "hook": "blocks.1.hook_resid_post",
                        "model": "runs/char"}
    assert row.explained_variance == last["explained_variance"] and row.l0 == last["l0"]
    assert row.dead_fraction == last["dead_fraction"]
    assert row.params == 2 * D_IN * D_SAE + D_SAE + D_IN  # W_enc, W_dec, b_enc, b_dec
    assert row.tokens_per_s == pytest.approx(last["tokens"] / last["elapsed"])
    assert f"EV {last['explained_variance']:.3f}" in row.sae_text
    assert csv_row(row)["kind"] == "sae" and "explained_variance" in CSV_COLUMNS


def test_sae_folders_are_listed_beside_model_runs(sae_run: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "learned-copy", root / "copy")
    shutil.copytree(sae_run, root / "saes" / "sae-1")  # where the Features pane trains them
    rows = {r.name: r for r in summarize_runs(root)}
    assert set(rows) == {"copy", "saes/sae-1"}
    assert (rows["copy"].kind, rows["saes/sae-1"].kind) == ("run", "sae")
    assert rows["saes/sae-1"].status == "finished"


def test_a_killed_sae_reads_stopped_and_a_live_one_running(sae_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(sae_run, tmp_path / "sae")
    metrics = run / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join(ln for ln in lines if json.loads(ln)["kind"] != "end") + "\n")
    assert summarize_run(run).status == "running"  # written just now, no closing record
    old = time.time() - 3600
    for name in ("metrics.jsonl", "trainer_state.json"):
        os.utime(run / name, (old, old))
    row = summarize_run(run)
    assert row.status == "stopped" and "killed?" in row.detail


def test_a_damaged_sae_config_is_a_damaged_row(sae_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(sae_run, tmp_path / "sae")
    (run / "cfg.json").write_text("{not json")
    row = summarize_run(run)
    assert row.status == "damaged" and "cfg.json" in row.detail


def test_tensorboard_export_of_an_sae(sae_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tui_lab.core.runs.tensorboard_export import export_run

    result = export_run(sae_run, tmp_path / "tb")
    events = EventAccumulator(str(result.folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    steps = _records(sae_run, "step")
    assert {"sae/loss", "sae/explained_variance", "sae/l0", "sae/dead_fraction"} <= set(events.Tags()["scalars"])
    for tag, key in (("sae/explained_variance", "explained_variance"), ("sae/mse", "mse")):
        points = events.Scalars(tag)
        assert [p.step for p in points] == [r["step"] for r in steps]
        assert [p.value for p in points] == pytest.approx([r[key] for r in steps], rel=1e-6)
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert '"d_sae": 64' in text
