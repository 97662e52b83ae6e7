"""`tfx-lab heads` (JSON and table) and `--at-step` on a tiny trained run (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import tiny_config
from tui_lab.cli import main
from tui_lab.core.analysis.head_scores import PATTERNS
from tui_lab.core.training.train import TrainingRun


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("heads") / "run"
    cfg = tiny_config(train={"steps": 8, "eval_every": 4, "eval_examples": 8})
    TrainingRun(cfg, out).run()  # history: steps 1, 2, 4, 8
    return out


def test_heads_json_scores_every_head(run_dir, capsys):
    assert main(["heads", "--run", str(run_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step"] == 8 and data["task"] == "copy"
    heads = data["heads"]
    # tiny: 1 encoder + 1 decoder layer, 2 heads each: encoder self, decoder self, cross
    assert {h["name"] for h in heads} == {"encoder.0.self", "decoder.0.self", "decoder.0.cross"}
    assert len(heads) == 6
    for h in heads:
        assert h["best"] in PATTERNS and 0.0 <= h["best_score"] <= 1.0
        assert h["best_score"] == max(h["scores"].values())
        assert h["label"] == f"{h['name']}:{h['head']}"
    assert all("alignment" in h["scores"] for h in heads if h["name"].endswith(".cross"))
    scores = [h["best_score"] for h in heads]
    assert scores == sorted(scores, reverse=True)


def test_heads_at_a_snapshot(run_dir, capsys):
    assert main(["heads", "--run", str(run_dir), "--at-step", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 2


def test_at_step_without_a_snapshot_names_the_nearest(run_dir, capsys):
    for command in (["decode", "--input", "12"], ["eval", "--n", "4"]):
        assert main([*command, "--run", str(run_dir), "--at-step", "3"]) == 2
        err = capsys.readouterr().err
        assert err == "tfx-lab: error: no snapshot at step 3; nearest: 2, 4\n"


def test_decode_and_eval_at_a_snapshot(run_dir, capsys):
    assert main(["decode", "--run", str(run_dir), "--at-step", "4", "--input", "12", "--json"]) == 0
    assert "output" in json.loads(capsys.readouterr().out)
    assert main(["eval", "--run", str(run_dir), "--at-step", "1", "--n", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 1


def test_heads_table_is_the_json_best_first(run_dir, capsys):
    assert main(["heads", "--run", str(run_dir), "--json"]) == 0
    heads = json.loads(capsys.readouterr().out)["heads"]
    assert main(["heads", "--run", str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{run_dir}: step 8, task copy; heads by best score"
    assert len(lines) == 1 + len(heads)
    for line, h in zip(lines[1:], heads, strict=True):
        cells = line.split()
        assert cells[:3] == [h["label"], h["best"], f"{h['best_score']:.2f}"]
        others = {k: f"{v:.2f}" for k, v in h["scores"].items() if k != h["best"]}
        assert dict(zip(cells[3:-2:2], cells[4:-2:2], strict=True)) == others
        assert cells[-2:] == ["entropy", f"{h['entropy']:.2f}"]
