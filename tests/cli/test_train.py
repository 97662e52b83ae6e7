"""``tfx-lab train``: the run folder it writes, how a run ends (steps, time limit, target),
``--seed``, ``--resume``, ``--out`` and the runs root. Every model here is tiny."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli.helpers import assert_one_line_error, last_json_line, tfx
from tests.conftest import tiny_config


def preset(tmp_path: Path, name: str = "tiny", **sections: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(tiny_config(**sections).to_yaml())
    return path


def records(run: Path, kind: str) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def end_of(run: Path) -> dict:
    return json.loads((run / "state.json").read_text())["end"]


def test_train_writes_a_complete_run_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = tfx("train", "--preset", str(preset(tmp_path, train={"steps": 6, "eval_every": 3})),
                          "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = last_json_line(proc.stdout)
    assert summary["step"] == 6 and summary["reason"] == "finished"
    for name in ("config.yaml", "model.safetensors", "optimizer.pt", "state.json", "metrics.jsonl",
                 "log.txt"):
        assert (out / name).is_file(), name
    assert len(records(out, "step")) == 6 and [r["step"] for r in records(out, "eval")] == [3, 6]
    assert end_of(out)["reason"] == "finished"


def test_max_seconds_ends_the_run_on_its_time_limit(tmp_path: Path) -> None:
    """5000 tiny steps take far more than a second anywhere (and end the test if the limit
    were ignored)."""
    out = tmp_path / "run"
    p = preset(tmp_path, train={"steps": 5000, "eval_every": 5000})
    proc = tfx("train", "--preset", str(p), "--out", str(out), "--max-seconds", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = last_json_line(proc.stdout)
    assert summary["reason"] == "time"
    state = json.loads((out / "state.json").read_text())
    assert state["end"]["reason"] == "time" and "time limit of 1 s" in state["end"]["message"]
    assert 0 < state["step"] < 5000 and records(out, "step")[-1]["step"] == state["step"]
    # The limit is what stopped it: the run's own clock passed it (a rule, not a speed).
    assert state["elapsed"] >= 1.0
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["max_seconds"] == 1.0


def test_a_run_ends_on_its_target(tmp_path: Path) -> None:
    """Single digits to copy: the target (90% exact match) comes long before the 300 steps."""
    out = tmp_path / "run"
    p = preset(tmp_path, model={"d_model": 16, "d_ff": 32}, task={"min_len": 1, "max_len": 1},
               train={"steps": 300, "lr": 1e-2, "eval_every": 10, "eval_examples": 50,
                      "target_accuracy": 0.9})
    proc = tfx("train", "--preset", str(p), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = last_json_line(proc.stdout)
    assert summary["reason"] == "target" and summary["step"] < 300
    assert end_of(out)["reason"] == "target"
    last_eval = records(out, "eval")[-1]
    assert last_eval["step"] == summary["step"] and last_eval["exact_match"] >= 0.9
    assert all(r["exact_match"] < 0.9 for r in records(out, "eval")[:-1])  # it stopped at the first


def _first_losses(tmp_path: Path, name: str, seed: str) -> list[float]:
    out = tmp_path / name
    p = preset(tmp_path, train={"steps": 4, "eval_every": 4, "seed": 0})
    proc = tfx("train", "--preset", str(p), "--out", str(out), "--seed", seed, "--json")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["seed"] == int(seed)
    return [r["loss"] for r in records(out, "step")]


def test_seed_same_seed_same_losses_another_seed_different(tmp_path: Path) -> None:
    first = _first_losses(tmp_path, "a", "7")
    again = _first_losses(tmp_path, "b", "7")
    other = _first_losses(tmp_path, "c", "8")
    assert len(first) == 4
    assert again == pytest.approx(first, rel=1e-5)
    assert max(abs(x - y) for x, y in zip(first, other, strict=True)) > 1e-3


def test_bad_preset_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  d_modle: 64\n")
    assert_one_line_error(tfx("params", "--preset", str(bad)), "did you mean 'd_model'")
    bad.write_text("model: [1, 2\n")
    assert_one_line_error(tfx("train", "--preset", str(bad)), "YAML")


def test_train_without_out_writes_under_tfx_lab_runs(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    p = preset(tmp_path, train={"steps": 2, "eval_every": 2})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFX_LAB_RUNS", str(tmp_path / "mine"))
    proc = tfx("train", "--preset", str(p), "--json")
    assert proc.returncode == 0, proc.stderr
    run = Path(last_json_line(proc.stdout)["run"])
    assert run.parent == tmp_path / "mine" and run.name.startswith("tiny-")
    assert (run / "state.json").is_file() and not (tmp_path / "runs").exists()


def test_resume_continues_and_out_refuses_a_run(tmp_path: Path) -> None:
    p = preset(tmp_path, name="t", train={"steps": 20})
    out = tmp_path / "run"
    assert tfx("train", "--preset", str(p), "--out", str(out), "--steps", "10", "--json").returncode == 0
    assert_one_line_error(tfx("train", "--preset", str(p), "--out", str(out)), "--resume")
    proc = tfx("train", "--resume", str(out), "--steps", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    assert last_json_line(proc.stdout)["step"] == 20
    assert [r["step"] for r in records(out, "step")] == list(range(1, 21))
