"""Opening the lab from the command line: ``--run``, ``--runs-dir``, ``--preset`` and ``watch``.

Each test runs ``tfx-lab ...`` through ``main`` exactly as the command does; only the
app's ``run()`` is swapped for a headless one driven by a pilot, which records what the
lab the command built shows, then quits.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import DATA, assert_one_line_error, tfx
from tui_lab.core.config.lab_config import load_file

TINY_PRESET = DATA.parent / "ui" / "data" / "tiny.yaml"  # trains 40 tiny steps in seconds
SIZE = (120, 40)

Check = Callable[[Any, dict[str, Any]], Awaitable[None]]


@pytest.fixture(autouse=True)
def lab_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test in its own folder: a lab told nothing writes to ./runs there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TFX_LAB_RUNS", raising=False)
    monkeypatch.setenv("TFX_LAB_PRESETS", str(tmp_path / "my-presets"))
    return tmp_path


def headless(monkeypatch: pytest.MonkeyPatch, check: Check) -> dict[str, Any]:
    """Make the lab's ``run()`` headless: ``check(pilot, seen)`` runs in it, then the app
    quits. Returns ``seen`` (with ``"app"``, and ``"error"`` if the check raised)."""
    from textual.app import App

    from tui_lab.ui.app import LabApp

    seen: dict[str, Any] = {}

    def run(self: LabApp, **_: Any) -> Any:
        seen["app"] = self

        async def drive(pilot: Any) -> None:
            try:
                await check(pilot, seen)
            except BaseException as exc:  # reported after the app is gone
                seen["error"] = exc
            finally:
                self.exit()

        return App.run(self, headless=True, size=SIZE, auto_pilot=drive)

    monkeypatch.setattr(LabApp, "run", run)
    return seen


async def until(pilot: Any, predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.05)


def finished(seen: dict[str, Any]) -> Any:
    if "error" in seen:
        raise seen["error"]
    assert "app" in seen, "the lab was never started"
    return seen["app"]


def test_run_opens_that_run_with_its_settings(monkeypatch: pytest.MonkeyPatch,
                                              learned_run: Path) -> None:
    """The lab starts on the run's config (restoring its model is tests/ui/test_open_run's)."""

    async def check(pilot: Any, seen: dict[str, Any]) -> None:
        await pilot.pause()
        seen["config"] = pilot.app.config.to_dict()

    seen = headless(monkeypatch, check)
    proc = tfx("--run", str(learned_run))
    assert proc.returncode == 0, proc.stderr
    app = finished(seen)
    assert app.run_dir == learned_run
    assert seen["config"] == load_file(learned_run / "config.yaml").to_dict()
    assert seen["config"]["model"]["n_decoder_layers"] == 2  # not the default preset's


def test_runs_dir_is_where_the_lab_writes_its_runs(monkeypatch: pytest.MonkeyPatch,
                                                  lab_folders: Path) -> None:
    """A run started in the lab (Train pane, space) is written under --runs-dir, not ./runs."""
    mine = lab_folders / "elsewhere" / "my-runs"

    def written() -> list[Path]:
        return sorted(mine.glob("*/state.json")) if mine.is_dir() else []

    async def check(pilot: Any, seen: dict[str, Any]) -> None:
        app = pilot.app
        await until(pilot, lambda: app.core is not None, "torch to load")
        await pilot.press("2", "space")
        await until(pilot, lambda: bool(written()), "a run folder under --runs-dir")

    seen = headless(monkeypatch, check)
    proc = tfx("--preset", str(TINY_PRESET), "--runs-dir", str(mine))
    assert proc.returncode == 0, proc.stderr
    app = finished(seen)
    assert app.config.name == "tiny"  # --preset reached the lab too
    (state,) = written()
    assert state.parent.name.startswith("tiny-")
    assert not (lab_folders / "runs").exists()


def test_watch_follows_the_run_on_the_train_pane(monkeypatch: pytest.MonkeyPatch,
                                                 tiny_run: Path) -> None:
    async def check(pilot: Any, seen: dict[str, Any]) -> None:
        await pilot.pause()
        seen["pane"] = pilot.app.active_pane

    seen = headless(monkeypatch, check)
    proc = tfx("watch", str(tiny_run))
    assert proc.returncode == 0, proc.stderr
    app = finished(seen)
    assert app.run_dir == tiny_run and app.follow_run is True
    assert seen["pane"] == "train"
    assert app.config.to_dict() == load_file(tiny_run / "config.yaml").to_dict()


@pytest.mark.parametrize("make", ["missing", "file"])
def test_watch_refuses_a_bad_folder_in_one_line_before_the_lab_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: str
) -> None:
    target = tmp_path / "not-a-run"
    if make == "file":
        target.write_text("x")

    async def check(pilot: Any, seen: dict[str, Any]) -> None:
        raise AssertionError("the lab started")

    seen = headless(monkeypatch, check)
    proc = tfx("watch", str(target))
    assert_one_line_error(proc, f"{target}: no such run folder")
    assert proc.returncode == 2 and "app" not in seen


@pytest.mark.parametrize("make", ["no-config", "not-cached", "revision-on-a-folder"])
def test_model_refuses_a_bad_source_in_one_line_before_the_lab_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: str
) -> None:
    """A folder without config.json, a hub name the local cache lacks (nothing is downloaded),
    a --revision for a folder: one line, exit 2, and no lab."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    folder = tmp_path / "weights-only"
    folder.mkdir()
    args, fragment = {
        "no-config": (["--model", str(folder)], "no config.json"),
        "not-cached": (["--model", "EleutherAI/pythia-14m"], "hf download EleutherAI/pythia-14m"),
        "revision-on-a-folder": (["--model", str(folder), "--revision", "main"], "no revisions"),
    }[make]

    async def check(pilot: Any, seen: dict[str, Any]) -> None:
        raise AssertionError("the lab started")

    seen = headless(monkeypatch, check)
    proc = tfx(*args)
    assert_one_line_error(proc, fragment)
    assert proc.returncode == 2 and "app" not in seen


def test_model_opens_the_lab_on_that_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``tfx-lab --model FOLDER``: the lab comes up and opens the model (Build shows its card)."""
    from bench.hf_factory import save_family

    folder = tmp_path / "tiny-gpt2"
    reference = save_family(folder, "gpt2")

    async def check(pilot: Any, seen: dict[str, Any]) -> None:
        app = pilot.app
        await until(pilot, lambda: app.opened is not None or app.model_source is None, "the model")
        seen["card"] = app.opened.card if app.opened is not None else None
        seen["build_card"] = app.query_one("#build-card-col").display

    seen = headless(monkeypatch, check)
    proc = tfx("--model", str(folder))
    assert proc.returncode == 0, proc.stderr
    finished(seen)
    assert seen["card"] is not None and seen["card"].family == "gpt2"
    assert seen["card"].n_params == reference.num_parameters()
    assert seen["build_card"] is True
