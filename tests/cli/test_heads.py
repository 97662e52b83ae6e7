"""`tfx-lab heads` (JSON and table) and `--at-step` on a tiny trained run, and the
one-layer induction control's atlas (no head labelled), in process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import tiny_config
from tui_lab.cli import main
from tui_lab.core.analysis.heads.atlas import NO_PATTERN, PATTERNS
from tui_lab.core.training.train import TrainingRun

CONTROL = Path(__file__).resolve().parents[1] / "data" / "induction-control"


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
    assert data["floor"] == 0.3
    assert set(data["probes"]) == {"task"} and data["probes"]["task"].startswith("copy: 64 held-out examples")
    for h in heads:
        assert h["best"] in PATTERNS and 0.0 <= h["best_score"] <= 1.0
        assert h["best_score"] == max(h["scores"].values())
        assert h["label"] == f"{h['name']}:{h['head']}"
        assert h["pattern"] in (h["best"], None)
        assert set(h["probes"]) == set(h["scores"]) == set(h["chance"])  # each score names its probe
        assert set(h["probes"].values()) == {"task"}
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
    assert lines[1].startswith("probe task (diagonal, previous, first, alignment): copy: 64 held-out examples")
    assert lines[2] == "label floor: lift over chance ≥ 0.30, else no clear pattern"
    _check_rows(lines[3:], heads)


ROW = re.compile(r"^(\S+) +(no clear pattern|\S+) +(\S+) +(\d\.\d\d)   (.*)  entropy (\d+\.\d\d)$")


def _check_rows(lines: list[str], heads: list[dict]) -> None:
    """Each table row holds its head's label, name shown, best pattern and score, the rest."""
    assert len(lines) == len(heads)
    for line, h in zip(lines, heads, strict=True):
        match = ROW.match(line)
        assert match, line
        label, shown, best, score, rest, ent = match.groups()
        assert (label, best, score, ent) == (h["label"], h["best"], f"{h['best_score']:.2f}", f"{h['entropy']:.2f}")
        assert shown == (h["pattern"] or NO_PATTERN)
        cells = rest.split()
        others = {k: f"{v:.2f}" for k, v in h["scores"].items() if k != h["best"]}
        assert dict(zip(cells[::2], cells[1::2], strict=True)) == others


def test_the_induction_control_has_no_clear_pattern(capsys):
    """The one-layer control's heads are weakly induction-like: shown as no clear pattern."""
    assert main(["heads", "--run", str(CONTROL), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["probes"]) == {"task", "task-repeats"}
    heads = data["heads"]
    assert len(heads) == 4
    for h in heads:
        assert h["best"] == "induction" and h["pattern"] is None
        assert h["probes"]["induction"] == h["probes"]["duplicate"] == "task-repeats"
        assert h["probes"]["previous"] == "task"
    assert main(["heads", "--run", str(CONTROL)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("probe task (diagonal, previous, first): induction: 64 validation sequences")
    assert lines[2].startswith("probe task-repeats (duplicate, induction): induction: 64 of its sequences")
    _check_rows(lines[4:], heads)
    assert all(NO_PATTERN in line for line in lines[4:])
