"""``tfx-lab runs``, ``compare`` and ``sweep``: output shapes, one-line errors, a real tiny sweep
that is interrupted and resumed (skipping a run that was already complete)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, tfx
from tests.conftest import tiny_config
from tests.core.runs.test_summary import write_run
from tui_lab.core.runs.summary import CSV_COLUMNS
from tui_lab.core.sweeps.spec import plan_sweep, spec_from_dict

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """Two finished runs, one in a sweep folder, and a damaged one."""
    write_run(tmp_path / "a", tiny_config(train={"target_accuracy": 0.9}))
    write_run(tmp_path / "sw" / "norm=post-s0", tiny_config(model={"norm": "post"}))
    bad = write_run(tmp_path / "broken")
    (bad / "state.json").write_text("{oops")
    return tmp_path


def test_runs_json_lists_every_run_with_its_summary(runs_dir: Path) -> None:
    proc = tfx("runs", str(runs_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == ["a", "broken", "sw/norm=post-s0"]
    a, broken, post = rows
    assert a["status"] == "finished" and a["steps_to_target"] == 20 and a["best_exact_match"] == 1.0
    assert broken["status"] == "damaged" and "state.json: not valid JSON" in broken["detail"]
    assert "model.norm=post" in post["label"]
    assert {"name", "preset", "label", "diff", "status", "step", "best_exact_match", "bits_per_char",
            "steps_to_target", "seconds_to_target", "tokens_per_s", "params", "date"} <= set(a)


def test_runs_csv_and_table(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = tfx("runs", str(runs_dir), "--csv")
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert proc.returncode == 0 and len(rows) == 3
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert rows[1]["status"] == "damaged"
    monkeypatch.setenv("TFX_LAB_RUNS", str(runs_dir))  # DIR defaults to the runs root
    monkeypatch.setenv("COLUMNS", "200")
    table = tfx("runs").stdout
    assert "broken" in table and "damaged" in table and "norm=post-s0" in table


def test_runs_errors_are_one_line(tmp_path: Path) -> None:
    assert_one_line_error(tfx("runs", str(tmp_path / "nope")), "no such folder")
    assert_one_line_error(tfx("compare", str(tmp_path / "nope")), "no such run folder")
    write_run(tmp_path / "a")
    assert_one_line_error(tfx("compare", str(tmp_path / "a"), "--plot", "--json"), "--plot")


def test_compare_expands_a_sweep_once_and_plots_with_legends(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = runs_dir / "sw"
    write_run(sweep / "norm=pre-s0")
    (sweep / "sweep.json").write_text("{}")
    proc = tfx("compare", *map(str, sorted(sweep.iterdir())), str(sweep), "--csv")
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["name"] for r in rows) == ["norm=post-s0", "norm=pre-s0"]
    monkeypatch.setenv("COLUMNS", "160")
    plot = tfx("compare", str(sweep / "norm=pre-s0"), str(sweep / "norm=post-s0"), "--plot").stdout
    plot = re.sub(r"\x1b\[[0-9;]*m", "", plot)
    assert "train loss" in plot and "val loss" in plot
    # Legends say how each run differs from the others (what they share is left out).
    assert "━━ model.norm=post" in plot and "━━ norm=pre-s0" in plot


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


@pytest.mark.parametrize("name", ["ln-warmup", "positions", "char-lm-tune"])
def test_every_shipped_sweep_plans_valid_runs(tmp_path: Path, name: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tui_lab.core.sweeps.spec import SWEEPS_DIR, load_sweep_spec, plan_sweep

    assert sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml")) == ["char-lm-tune", "ln-warmup", "positions"]
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


def _tiny_preset(path: Path, steps: int) -> Path:
    cfg = tiny_config(train={"steps": steps, "eval_every": 100, "target_accuracy": None,
                             "checkpoint_seconds": 0.5})
    path.write_text(cfg.to_yaml(full=True))
    return path


def test_a_sweep_interrupted_and_resumed_skips_complete_runs(tmp_path: Path) -> None:
    """2 arms x 1 seed: norm=pre is complete before the sweep starts (skipped both times);
    norm=post is interrupted with SIGINT (it saves), then resumed from its checkpoint."""
    preset = _tiny_preset(tmp_path / "tiny.yaml", steps=400)
    out = tmp_path / "sw"
    args = ["sweep", "--preset", str(preset), "--vary", "model.norm=pre,post", "--out", str(out)]
    plan = plan_sweep(spec_from_dict({"preset": str(preset), "vary": {"model.norm": ["pre", "post"]}}),
                      out, max_threads=1, pinned=True)
    done = plan.runs[0]
    write_run(done.folder, done.config, steps=400, closing="finished 400 steps")
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
    assert 0 < stopped_at < 400

    proc = tfx(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    runs = {r["name"]: r for r in record["runs"]}
    assert runs["norm=pre-s0"]["action"] == "skip"
    assert runs["norm=post-s0"]["action"] == "resume" and runs["norm=post-s0"]["reason"] == "finished"
    assert (done.folder / "metrics.jsonl").read_bytes() == before  # the complete run was not touched
    log = (out / "norm=post-s0" / "log.txt").read_text()
    assert f"from step {stopped_at} to 400" in log and log.strip().endswith("finished 400 steps")
    assert [a["label"] for a in record["arms"]] == ["norm=pre", "norm=post"]
    assert [row["finished"] for row in record["table"]] == [1, 1]
    assert json.loads((out / "sweep.json").read_text())["runs"][1]["summary"]["status"] == "finished"
    listed = json.loads(tfx("runs", str(out), "--json").stdout)
    assert sorted(r["name"] for r in listed) == ["norm=post-s0", "norm=pre-s0"]
    # The runs read as their arm: what they share with the sweep's preset is left out.
    assert {r["name"]: r["label"] for r in listed}["norm=post-s0"] == "model.norm=post"
