"""``tfx-lab sweep``: refusals before anything starts, the shipped sweeps, one shipped sweep
run for real at 2 steps a run, and a tiny sweep interrupted and resumed (skipping a run
that was already complete)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import ROOT, assert_one_line_error, tfx
from tests.conftest import tiny_config
from tests.core.runs.test_summary import write_run
from tui_lab.core.sweeps.spec import plan_sweep, spec_from_dict


@pytest.mark.parametrize(
    ("vary", "message"),
    [
        ("model.nrom=pre,post", "model.nrom: unknown setting (did you mean 'norm'?)"),
        ("model.norm=pre,mid", "model.norm: 'mid' is not one of pre, post"),
        ("train.lr=fast,0.1", "train.lr: expected a number"),
        ("model.norm", "expected KEY=V1,V2"),
    ],
)
def test_bad_vary_is_refused_before_anything_starts(tmp_path: Path, vary: str, message: str) -> None:
    out = tmp_path / "sweep"
    proc = tfx("sweep", "--preset", "copy", "--vary", vary, "--vary", "train.warmup_steps=0,50",
               "--out", str(out))
    assert_one_line_error(proc, message)
    assert message in proc.stderr
    assert not out.exists()


def test_shipped_sweeps_resolve_by_name(tmp_path: Path) -> None:
    assert_one_line_error(tfx("sweep", "ln-warmupp", "--out", str(tmp_path / "x")), "did you mean 'ln-warmup'")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["ln-warmup", "positions", "char-lm-tune", "grokking"])
def test_every_shipped_sweep_plans_valid_runs(tmp_path: Path, name: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tui_lab.core.sweeps.spec import SWEEPS_DIR, load_sweep_spec, plan_sweep

    assert sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml")) == ["char-lm-tune", "grokking", "ln-warmup", "positions"]
    monkeypatch.setenv("COLUMNS", "200")  # argparse would wrap a name at its hyphens
    assert name in tfx("sweep", "--help").stdout  # the help names every shipped sweep
    spec = load_sweep_spec(name)
    plan = plan_sweep(spec, tmp_path / name)  # every arm's config is validated here
    arms = 1
    for values in spec.vary.values():
        arms *= len(values)
    assert len(plan.arms) == arms and len(plan.runs) == arms * (spec.seeds or 1)
    for run in plan.runs:
        for key, value in run.arm.values.items():
            section, setting = key.split(".")
            assert getattr(getattr(run.config, section), setting) == value


# Steps of the interrupted run: enough that it is still training when the SIGINT (sent
# at its first step) arrives, few enough that the resumed half is quick.
STEPS = 120


def _tiny_preset(path: Path, steps: int) -> Path:
    cfg = tiny_config(train={"steps": steps, "eval_every": 100, "target_accuracy": None,
                             "checkpoint_seconds": 0.5})
    path.write_text(cfg.to_yaml(full=True))
    return path


def test_a_sweep_interrupted_and_resumed_skips_complete_runs(tmp_path: Path) -> None:
    """2 arms x 1 seed: norm=pre is complete before the sweep starts (skipped both times);
    norm=post is interrupted with SIGINT (it saves), then resumed from its checkpoint."""
    preset = _tiny_preset(tmp_path / "tiny.yaml", steps=STEPS)
    out = tmp_path / "sw"
    args = ["sweep", "--preset", str(preset), "--vary", "model.norm=pre,post", "--out", str(out)]
    plan = plan_sweep(spec_from_dict({"preset": str(preset), "vary": {"model.norm": ["pre", "post"]}}),
                      out, max_threads=1, pinned=True)
    done = plan.runs[0]
    write_run(done.folder, done.config, steps=STEPS, closing=f"finished {STEPS} steps")
    before = (done.folder / "metrics.jsonl").read_bytes()

    sweep = subprocess.Popen([sys.executable, "-m", "tui_lab.cli", *args, "--json"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    metrics = out / "norm=post-s0" / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and sweep.poll() is None:
        if metrics.exists() and b'"step"' in metrics.read_bytes():
            break
        time.sleep(0.05)
    sweep.send_signal(signal.SIGINT)
    stdout, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, stderr
    record = json.loads(stdout)
    assert record["interrupted"] is True
    post = {r["name"]: r for r in record["runs"]}["norm=post-s0"]
    assert post["reason"] == "stopped" and post["summary"]["status"] == "stopped"
    stopped_at = post["summary"]["step"]
    assert 0 < stopped_at < STEPS

    proc = tfx(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    runs = {r["name"]: r for r in record["runs"]}
    assert runs["norm=pre-s0"]["action"] == "skip"
    assert runs["norm=post-s0"]["action"] == "resume" and runs["norm=post-s0"]["reason"] == "finished"
    assert (done.folder / "metrics.jsonl").read_bytes() == before  # the complete run was not touched
    log = (out / "norm=post-s0" / "log.txt").read_text()
    assert f"from step {stopped_at} to {STEPS}" in log
    assert log.strip().endswith(f"finished {STEPS} steps")
    assert [a["label"] for a in record["arms"]] == ["norm=pre", "norm=post"]
    assert [row["finished"] for row in record["table"]] == [1, 1]
    assert json.loads((out / "sweep.json").read_text())["runs"][1]["summary"]["status"] == "finished"
    listed = json.loads(tfx("runs", str(out), "--json").stdout)
    assert sorted(r["name"] for r in listed) == ["norm=post-s0", "norm=pre-s0"]
    # The runs read as their arm: what they share with the sweep's preset is left out.
    assert {r["name"]: r["label"] for r in listed}["norm=post-s0"] == "model.norm=post"


def test_a_shipped_sweep_by_name_with_seeds_parallel_and_steps(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``positions`` (3 arms, 3 seeds, 600 steps as shipped) cut to 1 seed and 2 steps a run,
    all at once; with no --out it goes to <runs>/positions."""
    monkeypatch.setenv("TFX_LAB_RUNS", str(tmp_path / "runs"))
    proc = tfx("sweep", "positions", "--seeds", "1", "--parallel", "3", "--steps", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    out = tmp_path / "runs" / "positions"
    assert json.loads((out / "sweep.json").read_text()) == record
    assert record["spec"]["seeds"] == 1 and record["spec"]["parallel"] == 3
    assert record["spec"]["steps"] == 2
    assert [a["label"] for a in record["arms"]] == [f"positional={p}" for p in
                                                    ("sinusoidal", "learned", "rope")]
    assert len(record["runs"]) == 3  # one seed per arm, not the shipped three
    for run in record["runs"]:
        assert run["reason"] == "finished" and run["summary"]["step"] == 2, run
        config = (out / run["name"] / "config.yaml").read_text()
        assert "steps: 2\n" in config and "target_accuracy: 0.95" in config  # --steps, the spec's set
    assert [row["finished"] for row in record["table"]] == [1, 1, 1]
    assert [row["seeds"] for row in record["table"]] == [1, 1, 1]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--seeds", "0", "--seeds: must be >= 1, got 0"),
        ("--seeds", "-1", "--seeds: must be >= 1, got -1"),
        ("--seeds", "nan", "argument --seeds: invalid int value: 'nan'"),
        ("--seeds", "inf", "argument --seeds: invalid int value: 'inf'"),
        ("--parallel", "0", "--parallel: must be >= 1, got 0"),
        ("--parallel", "-2", "--parallel: must be >= 1, got -2"),
        ("--parallel", "nan", "argument --parallel: invalid int value: 'nan'"),
        ("--parallel", "inf", "argument --parallel: invalid int value: 'inf'"),
        ("--max-seconds", "nan", "--max-seconds: must be a finite number, got nan"),
        ("--max-seconds", "0", "--max-seconds: must be > 0, got 0.0"),
    ],
)
def test_a_bad_number_of_seeds_or_runs_at_once_is_refused_in_one_line(
        tmp_path: Path, flag: str, value: str, message: str) -> None:
    out = tmp_path / "sweep"
    proc = tfx("sweep", "--preset", "copy", "--vary", "model.norm=pre,post", flag, value, "--out", str(out))
    assert proc.returncode == 2
    assert_one_line_error(proc, message)
    assert not out.exists()  # refused before anything is written


def test_the_json_printed_is_the_verbs_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--json`` prints ``run(request).to_json()`` and nothing else (2 arms, 2 steps a run)."""
    from tui_lab.core.verbs import sweep as verb

    results: list[verb.Result] = []
    real_run = verb.run

    def recording_run(*args: object, **kwargs: object) -> verb.Result:
        result = real_run(*args, **kwargs)  # type: ignore[arg-type]
        results.append(result)
        return result

    monkeypatch.setattr(verb, "run", recording_run)
    preset = _tiny_preset(tmp_path / "tiny.yaml", steps=2)
    out = tmp_path / "sw"
    proc = tfx("sweep", "--preset", str(preset), "--vary", "model.norm=pre,post", "--seeds", "1",
               "--parallel", "2", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert len(results) == 1
    assert json.loads(proc.stdout) == results[0].to_json()
    assert json.loads((out / "sweep.json").read_text()) == results[0].to_json()
    assert [run["reason"] for run in json.loads(proc.stdout)["runs"]] == ["finished", "finished"]
