"""Fixtures for the lab's pilot and snapshot tests: a tiny preset, a trained run, folders."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TINY = DATA / "tiny.yaml"


@pytest.fixture(autouse=True)
def lab_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in its own folder: runs and user presets land there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFX_LAB_RUNS", "runs")
    monkeypatch.setenv("TFX_LAB_PRESETS", str(tmp_path / "my-presets"))
    return tmp_path


def _train(out: Path, stop_at: int | None) -> Path:
    warnings.filterwarnings("ignore")
    from tui_lab.core.config import load_file
    from tui_lab.core.train import StepEvent, TrainingRun

    config = load_file(TINY)
    holder: dict[str, TrainingRun] = {}

    def on_event(event: object) -> None:
        if stop_at is not None and isinstance(event, StepEvent) and event.step >= stop_at:
            holder["run"].stop()

    run = TrainingRun(config, out, on_event=on_event)
    holder["run"] = run
    run.run()
    _freeze_timings(out)
    return out


def _freeze_timings(run_dir: Path) -> None:
    """Wall-clock figures (elapsed, tokens/s, ETA) vary per machine: fix them for snapshots."""
    lines = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "step":
            record.update(elapsed=record["step"] * 0.05, tokens_per_s=12345.0, eta=1.0)
        lines.append(json.dumps(record))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    state_path = run_dir / "state.json"
    state = json.loads(state_path.read_text())
    state["elapsed"] = 1.0
    state_path.write_text(json.dumps(state))


@pytest.fixture(scope="session")
def trained_run_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny preset trained 30 of its 40 steps (stopped), once per session."""
    return _train(tmp_path_factory.mktemp("master") / "tiny-run", stop_at=30)


@pytest.fixture
def trained_run(trained_run_master: Path, lab_folders: Path) -> Path:
    """A private copy of the trained run at ``runs/tiny-run`` (tests may continue it)."""
    dest = lab_folders / "runs" / "tiny-run"
    shutil.copytree(trained_run_master, dest)
    return Path("runs") / "tiny-run"
