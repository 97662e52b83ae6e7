"""Fixtures for the reliability suite: tiny runs, private folders, the command line.

Everything here is sized for a shared 2-core machine: tiny models, one
thread, CPU. The command line is driven in process through ``cli.main``
(the exact code ``tfx-lab`` runs, minus five seconds of interpreter and torch
start-up per call); the tests that are about processes (kill -9, ctrl+c) and
a few end-to-end checks start the real ``tfx-lab`` executable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).with_name("tfx-lab")
# The installed console script when there is one (what a user types), else the module.
TFX = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "tui_lab.cli"]


@dataclass
class CliResult:
    rc: int
    out: str
    err: str


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    """Run ``tfx-lab ARGS`` in this process; an escaping exception fails the test (a traceback)."""
    from tui_lab.cli import main

    capsys.readouterr()
    rc = main([str(a) for a in args])
    captured = capsys.readouterr()
    return CliResult(rc, captured.out, captured.err)


def tfx(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real ``tfx-lab`` executable."""
    return subprocess.run(
        [*TFX, *[str(a) for a in args]],
        capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def assert_one_line_error(rc: int, err: str, *fragments: str) -> str:
    """Non-zero exit, exactly one line on stderr, no traceback, every fragment present."""
    assert rc != 0, err
    text = err.strip()
    assert "Traceback" not in text, text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("tfx-lab: error: "), text
    assert_printable(text)
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    return text


def assert_printable(message: str) -> None:
    """No raw control or escape characters: a message must never drive the terminal."""
    bad = [c for c in message if unicodedata.category(c)[0] == "C"]
    assert not bad, (bad, message)


# --------------------------------------------------------------------------- runs


TINY_TRAIN = {"steps": 24, "batch_size": 8, "eval_every": 12, "eval_examples": 16, "warmup_steps": 2,
              "device": "cpu", "threads": 1}


def tiny(**sections: dict) -> object:
    """tests/conftest.py's tiny copy model, with a shorter run."""
    train = {**TINY_TRAIN, **sections.pop("train", {})}
    return tiny_config(train=train, **sections)


def train_run(out: Path, config: object, stop_at: int | None = None) -> Path:
    """Train ``config`` into ``out`` in this process (seconds)."""
    from tui_lab.core.training.train import StepEvent, TrainingRun

    holder: dict[str, TrainingRun] = {}

    def on_event(event: object) -> None:
        if stop_at is not None and isinstance(event, StepEvent) and event.step >= stop_at:
            holder["run"].stop()

    run = TrainingRun(config, out, on_event=on_event)  # type: ignore[arg-type]
    holder["run"] = run
    summary = run.run()
    assert summary["reason"] in ("finished", "stopped", "target"), summary
    return out


@pytest.fixture(scope="session")
def trained_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny copy run, trained once per session."""
    return train_run(tmp_path_factory.mktemp("reliability") / "copy-run", tiny())


@pytest.fixture
def run_dir(trained_master: Path, tmp_path: Path) -> Path:
    """A private copy of the trained run (tests damage it)."""
    dest = tmp_path / "run"
    shutil.copytree(trained_master, dest)
    return dest


def snapshot(folder: Path, names: tuple[str, ...] = ("config.yaml", "model.safetensors",
                                                     "optimizer.pt", "state.json")) -> dict[str, bytes]:
    """The bytes of a run folder's checkpoint files (what must never be damaged).

    state.json's ``"end"`` record is left out: it is added after the last save
    to say how the run ended (a nan, a device fault), and describes no file.
    """
    files = {n: (folder / n).read_bytes() for n in names if (folder / n).exists()}
    if "state.json" in files:
        try:
            state = json.loads(files["state.json"])
        except ValueError:
            return files
        if isinstance(state, dict) and state.pop("end", None) is not None:
            files["state.json"] = json.dumps(state, indent=2).encode() + b"\n"
    return files


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


def log_lines(folder: Path) -> list[str]:
    return (folder / "log.txt").read_text(encoding="utf-8").splitlines()


def assert_timestamped(lines: list[str]) -> None:
    """Every log.txt line starts with a local ISO-8601 time (what happened, when)."""
    from datetime import datetime

    for line in lines:
        stamp = line.split(" ", 1)[0]
        datetime.fromisoformat(stamp)  # raises if not a timestamp


def state(folder: Path) -> dict:
    return json.loads((folder / "state.json").read_text())


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in the test's own folder; the lab's runs and user presets land there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFX_LAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("TFX_LAB_PRESETS", str(tmp_path / "my-presets"))
    return tmp_path
