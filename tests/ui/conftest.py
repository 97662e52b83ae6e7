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


def private_copy(source: Path, lab_folders: Path, ignore: tuple[str, ...] = ()) -> Path:
    """A copy of the run at ``source`` under the test's ``runs/``, as the lab names it."""
    shutil.copytree(
        source, lab_folders / "runs" / source.name, ignore=shutil.ignore_patterns(*ignore)
    )
    return Path("runs") / source.name


@pytest.fixture
def trained_run(lab_folders: Path) -> Path:
    """A private copy of the committed tiny run at ``runs/tiny-run`` (tests may continue it)."""
    return private_copy(TINY_RUN, lab_folders)


# A copy model that has learned its task (99.4% exact match), committed (tests/data/make_runs.py):
# switching one of its heads off costs from almost nothing to almost everything, so the
# ablation, importance and sampling tests see effects a wrong answer would change.
LEARNED_RUN = Path(__file__).resolve().parents[1] / "data" / "learned-copy"


@pytest.fixture
def learned_run(lab_folders: Path) -> Path:
    """A private copy of the committed learned run at ``runs/learned-copy``.

    Without its ``ablation.json``: the lab works the importance table out itself.
    """
    return private_copy(LEARNED_RUN, lab_folders, ignore=("ablation.json",))


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
    return private_copy(mlm_run_source, lab_folders)
