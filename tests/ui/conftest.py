"""Fixtures for the lab's pilot and snapshot tests: a tiny preset, committed runs, folders."""

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
    # The keymap.yaml read is the test's own (none), never the developer's.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
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


# A copy model that has learned its task (99.4% exact match), committed (tests/data/make_runs.py):
# switching one of its heads off costs from almost nothing to almost everything, so the
# ablation, importance and sampling tests see effects a wrong answer would change.
LEARNED_RUN = Path(__file__).resolve().parents[1] / "data" / "learned-copy"


@pytest.fixture
def learned_run(lab_folders: Path) -> Path:
    """A private copy of the committed learned run at ``runs/learned-copy``.

    Without its ``ablation.json``: the lab works the importance table out itself.
    """
    dest = lab_folders / "runs" / "learned-copy"
    shutil.copytree(LEARNED_RUN, dest, ignore=shutil.ignore_patterns("ablation.json"))
    return Path("runs") / "learned-copy"


# A tiny encoder-only run (masked-lm), trained once per test session: its weights are
# whatever this machine's arithmetic makes, so tests compare the panes with the core's
# own answers on the same weights, never with fixed numbers.
TINY_MLM = DATA / "tiny-mlm.yaml"


@pytest.fixture(scope="session")
def mlm_run_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny masked-lm run, trained its 6 steps (with history snapshots) in-process."""
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.train import TrainingRun

    out = tmp_path_factory.mktemp("mlm") / "tiny-mlm"
    TrainingRun(load_preset(str(TINY_MLM)), out).run()
    return out


@pytest.fixture
def mlm_run(lab_folders: Path, mlm_run_source: Path) -> Path:
    """A private copy of the trained tiny masked-lm run at ``runs/tiny-mlm``."""
    dest = lab_folders / "runs" / "tiny-mlm"
    shutil.copytree(mlm_run_source, dest)
    return Path("runs") / "tiny-mlm"
