"""Run summaries, statuses, curves and sweep plans, on run folders the tests write (no training)."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tiny_config
from tui_lab.core.config.lab_config import ConfigError, LabConfig
from tui_lab.core.config.presets import load_preset
from tui_lab.core.runs.curves import mean_curve, read_curves
from tui_lab.core.runs.summary import list_run_folders, summarize_run, summarize_runs
from tui_lab.core.sweeps.spec import parse_vary, plan_sweep, spec_from_dict


def write_run(
    folder: Path,
    config: LabConfig | None = None,
    *,
    preset: str = "tiny",
    steps: int = 30,
    evals: tuple[tuple[int, float, float | None], ...] = ((10, 2.0, 0.2), (20, 1.0, 0.95), (30, 0.5, 1.0)),
    closing: str | None = "finished 30 steps",
    state: dict[str, Any] | None = None,
    age_s: float = 3600.0,
) -> Path:
    """A run folder as TrainingRun leaves it: config.yaml, state.json, metrics.jsonl, log.txt.

    ``age_s`` back-dates every file, so a folder without a closing line is not 'running'.
    """
    config = config or tiny_config()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(config.to_yaml(full=True))
    (folder / "state.json").write_text(json.dumps(
        state if state is not None else {"step": steps, "elapsed": steps * 0.1, "best_accuracy": None,
                                          "preset": preset}))
    lines = []
    by_step = {s: (v, em) for s, v, em in evals}
    for step in range(1, steps + 1):
        lines.append(json.dumps({"kind": "step", "step": step, "total_steps": config.train.steps,
                                 "loss": 3.0 / step, "lr": 1e-3, "grad_norm": 1.0,
                                 "tokens_per_s": 1000.0 + step, "elapsed": step * 0.1, "eta": 1.0}))
        if step in by_step:
            val, em = by_step[step]
            lines.append(json.dumps({"kind": "eval", "step": step, "val_loss": val,
                                     "exact_match": em, "n": 32, "overlap": 0}))
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    log = ["2026-01-02T03:04:05+00:00 training on cpu (1 thread) from step 0 to 30"]
    if closing:
        log.append(f"2026-01-02T03:04:09+00:00 {closing}")
    (folder / "log.txt").write_text("\n".join(log) + "\n")
    past = time.time() - age_s
    for f in folder.iterdir():
        os.utime(f, (past, past))
    return folder


def test_summary_of_a_finished_run(tmp_path: Path) -> None:
    cfg = tiny_config(train={"target_accuracy": 0.9})
    s = summarize_run(write_run(tmp_path / "r", cfg))
    assert s.status == "finished" and s.detail == "finished 30 steps"
    assert (s.step, s.total_steps) == (30, 30)
    assert s.best_exact_match == 1.0 and s.best_val_loss == 0.5
    # First evaluation at or above the target; seconds from the step line written just before it.
    assert s.steps_to_target == 20 and s.seconds_to_target == pytest.approx(2.0)
    assert s.tokens_per_s == 1030.0
    assert s.task == "copy" and s.preset == "tiny"
    assert s.params is None  # no weights written
    assert s.to_dict()["date"].startswith("2026-01-02")


def test_difference_from_the_named_preset(tmp_path: Path) -> None:
    cfg = load_preset("copy").with_values({"model.norm": "post", "train.warmup_steps": 0})
    s = summarize_run(write_run(tmp_path / "r", cfg, preset="copy"))
    assert s.label == "model.norm=post train.warmup_steps=0"
    assert s.to_dict()["label"] == s.label


def test_closing_lines_give_the_status(tmp_path: Path) -> None:
    cases = {
        "reached 100.0% exact match at step 30": "target",
        "time limit of 5 s reached at step 30": "time",
        "stopped at step 12": "stopped",
        "loss became nan at step 13; stopped (lower train.lr or raise warmup); the last good checkpoint is kept": "failed",
        "training failed at step 3: CUDA error": "failed",
    }
    for i, (line, status) in enumerate(cases.items()):
        s = summarize_run(write_run(tmp_path / f"r{i}", closing=line))
        assert s.status == status, line
    assert summarize_run(tmp_path / "r3").detail.startswith("nan:")


def test_the_end_recorded_in_state_json_gives_the_status(tmp_path: Path) -> None:
    end = {"reason": "time", "message": "time limit of 5 s reached at step 30", "step": 30}
    # No closing line in the log (it was lost, or never flushed): state.json tells.
    s = summarize_run(write_run(tmp_path / "r", closing=None,
                                state={"step": 30, "elapsed": 3.0, "preset": "tiny", "end": end}))
    assert s.status == "time" and s.detail == end["message"]
    nan = {"reason": "nan", "message": "loss became nan at step 13", "step": 13}
    s = summarize_run(write_run(tmp_path / "n", closing=None,
                                state={"step": 12, "elapsed": 1.0, "preset": "tiny", "end": nan}))
    assert s.status == "failed" and s.detail == "nan: loss became nan at step 13"


def test_running_and_killed_runs(tmp_path: Path) -> None:
    live = summarize_run(write_run(tmp_path / "live", closing=None, age_s=1.0,
                                   state={"step": 10, "elapsed": 1.0, "preset": "tiny"}))
    assert live.status == "running" and live.step == 30  # metrics run ahead of the checkpoint
    dead = summarize_run(write_run(tmp_path / "dead", closing=None,
                                   state={"step": 10, "elapsed": 1.0, "preset": "tiny"}))
    assert dead.status == "stopped" and "killed" in dead.detail and dead.step == 10


def test_char_lm_reports_bits_per_character(tmp_path: Path) -> None:
    cfg = load_preset("char-lm")
    s = summarize_run(write_run(tmp_path / "lm", cfg, preset="char-lm",
                                evals=((10, 1.5, None), (20, 1.3862943611198906, None))))
    assert s.is_lm and s.best_exact_match is None
    assert s.bits_per_char == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda f: (f / "config.yaml").write_text("model: [unclosed"), "not valid YAML"),
        (lambda f: (f / "config.yaml").write_text("model:\n  nrom: pre\n"), "unknown setting"),
        (lambda f: (f / "config.yaml").unlink(), "no config.yaml"),
        (lambda f: (f / "state.json").write_text("{not json"), "not valid JSON"),
        (lambda f: (f / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\""), "safetensors"),
    ],
)
def test_a_damaged_folder_is_a_row_with_its_reason(tmp_path: Path, damage: Any, reason: str) -> None:
    folder = write_run(tmp_path / "r")
    damage(folder)
    s = summarize_run(folder)
    assert s.status == "damaged"
    assert reason in s.detail and "\n" not in s.detail


def test_listing_finds_sweep_runs_and_skips_hidden_folders(tmp_path: Path) -> None:
    write_run(tmp_path / "a")
    write_run(tmp_path / "sweep" / "x-s0")
    write_run(tmp_path / "sweep" / "x-s1")
    (tmp_path / "sweep" / ".sweep" / "x-s0").mkdir(parents=True)
    (tmp_path / "sweep" / ".sweep" / "x-s0" / "config.yaml").write_text("x: 1")
    (tmp_path / "empty").mkdir()
    names = [s.name for s in summarize_runs(tmp_path)]
    assert names == ["a", "sweep/x-s0", "sweep/x-s1"]
    assert list_run_folders(tmp_path / "a") == [tmp_path / "a"]


def test_curves_by_step_and_seconds_keep_the_later_record_of_a_resumed_step(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "r")
    with open(folder / "metrics.jsonl", "a") as f:  # resumed from step 29: step 30 again
        f.write(json.dumps({"kind": "step", "step": 30, "loss": 0.01, "elapsed": 9.0}) + "\n")
        f.write('{"kind": "step", "st')  # a line cut short by a crash
    c = read_curves(folder)
    assert c.train_loss.steps == list(range(1, 31))
    assert c.train_loss.values[-1] == 0.01 and c.train_loss.seconds[-1] == 9.0
    assert c.val_loss.steps == [10, 20, 30] and c.exact_match.values == [0.2, 0.95, 1.0]
    assert c.val_loss.xs("seconds") == pytest.approx([1.0, 2.0, 9.0])
    other = read_curves(write_run(tmp_path / "o", evals=((10, 4.0, 0.0), (20, 3.0, 0.05))))
    mean = mean_curve([c.val_loss, other.val_loss])
    assert mean.steps == [10, 20] and mean.values == pytest.approx([3.0, 2.0])


def test_vary_values_parse_like_a_preset() -> None:
    assert parse_vary(["model.norm=pre,post", "train.lr=3e-3,0.01", "train.warmup_steps=0,50",
                       "model.tie_embeddings=true,false"]) == {
        "model.norm": ["pre", "post"], "train.lr": [0.003, 0.01],
        "train.warmup_steps": [0, 50], "model.tie_embeddings": [True, False]}
    with pytest.raises(ConfigError, match="expected KEY=V1,V2"):
        parse_vary(["model.norm"])


@pytest.mark.parametrize(
    ("vary", "message"),
    [
        ({"model.nrom": ["pre", "post"]}, "model.nrom: unknown setting (did you mean 'norm'?)"),
        ({"model.norm": ["pre", "mid"]}, "model.norm: 'mid' is not one of pre, post"),
        ({"model.d_model": [64, 66]}, "model.d_model: 66 is not divisible by n_heads=4"),
        ({"train.seed": [1, 2]}, "train.seed: set by seeds, not vary"),
    ],
)
def test_every_arm_is_validated_before_anything_starts(tmp_path: Path, vary: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        plan_sweep(spec_from_dict({"preset": "copy", "vary": vary}), tmp_path / "out")
    assert str(err.value) == message
    assert not (tmp_path / "out").exists()


def test_a_plan_is_every_arm_times_every_seed(tmp_path: Path) -> None:
    spec = spec_from_dict({"preset": "copy", "vary": {"model.norm": ["pre", "post"],
                                                       "train.warmup_steps": [0, 50]},
                           "seeds": 2, "steps": 150, "set": {"train.lr": 0.01}})
    plan = plan_sweep(spec, tmp_path, max_threads=1, pinned=True)
    assert [a.label for a in plan.arms] == ["norm=pre+warmup_steps=0", "norm=pre+warmup_steps=50",
                                            "norm=post+warmup_steps=0", "norm=post+warmup_steps=50"]
    assert len(plan.runs) == 8 and plan.runs[1].name == "norm=pre+warmup_steps=0-s1"
    cfg = plan.runs[-1].config
    assert (cfg.model.norm, cfg.train.warmup_steps, cfg.train.seed, cfg.train.steps, cfg.train.lr) == (
        "post", 50, 1, 150, 0.01)
    assert cfg.train.threads == 0  # pinned: the lab's own rule picks within the run's cores
    assert math.isclose(plan_sweep(spec, tmp_path, 1, pinned=False).runs[0].config.train.threads, 1)
