"""The Features pane in the lab: its number key shows it, its keys are in help with their ids."""

from __future__ import annotations

from tests.ui.helpers import SIZE, ready, tiny_app
from tui_lab.ui import pane_registry
from tui_lab.ui.panes.features.features_pane import FeaturesPane


async def test_its_key_shows_the_pane_and_help_lists_its_keys() -> None:
    app = tiny_app()
    number = pane_registry.spec("features").key
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press(number)
        await pilot.pause()
        assert app.active_pane == "features"
        pane = app.query_one(FeaturesPane)
        assert pane.display and app.pane("features") is pane
        assert f"{number} Features" in str(app.query_one("#tabs").render())
        found = {title: sections for _, title, sections, _ in
                 ((p.key, p.title, p.sections, p.extra) for p in app.pane_keys())}
        ids = {b.id for _, group in found["Features"] for b in group}
        assert {"features.train", "features.sort", "features.prompt", "feature_list.down"} <= ids
        await pilot.press("t")  # the tiny preset's model is not trained yet: one line, no crash
        await pilot.pause()
        assert "no model yet" in str(pane.query_one("#features-status").render())
