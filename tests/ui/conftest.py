"""Fixtures for the lab's pilot and snapshot tests: a tiny preset, a committed trained run, folders."""

from __future__ import annotations

import shutil
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


# A run of TINY trained 30 of its 40 steps, committed (tests/data/make_runs.py wrote it):
# the same weights and metrics on every machine, so what the panes show from it is too.
TINY_RUN = Path(__file__).resolve().parents[1] / "data" / "tiny-run"


@pytest.fixture
def trained_run(lab_folders: Path) -> Path:
    """A private copy of the committed tiny run at ``runs/tiny-run`` (tests may continue it)."""
    dest = lab_folders / "runs" / "tiny-run"
    shutil.copytree(TINY_RUN, dest)
    return Path("runs") / "tiny-run"
