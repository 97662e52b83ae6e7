"""The Patch pane in the lab: the key after the Features pane's shows it, its keys are in help
(with their ids) and in the command palette, and an opened run's model is patched."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
from tui_lab.ui import key_bindings, pane_registry
from tui_lab.ui.panes.patch.patch_pane import PatchPane


async def test_its_key_shows_the_pane_help_and_the_palette_list_its_keys() -> None:
    app = tiny_app()
    number = pane_registry.spec("patch").key
    assert number == "7"  # the design's order: Patch 7, Features 8
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(number)
        await pilot.pause()
        assert app.active_pane == "patch"
        pane = app.query_one(PatchPane)
        assert pane.display and app.pane("patch") is pane
        assert f"{number} Patch" in str(app.query_one("#tabs").render())
        found = {p.title: p.sections for p in app.pane_keys()}
        ids = {b.id for _, group in found["Patch"] for b in group}
        every = {b.id for b in key_bindings.PATCH}
        assert every | {"heatmap.down", "pick_list.pick"} <= ids
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Patch: Site", "Patch: Exact/attribution", "Patch: Logit attribution",
                "Patch: Over training", "Patch: Earlier snapshot"} <= titles
        await pilot.press("r")  # the tiny preset's model is not trained yet: one line, no crash
        await pilot.pause()
        assert "no model yet" in str(pane.query_one("#patch-status").render())


async def test_an_opened_run_is_patched_and_stepped_through_its_history(
        lab_folders: Path, history_run: Path) -> None:
    shutil.copytree(history_run, lab_folders / "runs" / "history-run")
    app = tiny_app(run_dir=str(Path("runs") / "history-run"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.state.current_run is not None, 60, "the run")
        await pilot.press(pane_registry.spec("patch").key)
        pane = app.query_one(PatchPane)
        await pilot.press("s", "s", "s", "r")
        await wait_until(pilot, lambda: pane.view.shown is not None and not pane.running, 120, "z")
        assert pane.view.shown.site == "z" and pane.pair.name == "induction"
        assert pane.view.atlas  # the atlas's labels of the run's heads
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: pane.view.step is not None and not pane.running, 120, "history")
        assert pane.view.history.steps == [4, 8, 12] and pane.view.step == 12
