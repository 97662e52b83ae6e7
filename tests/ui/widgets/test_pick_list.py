"""The preset list (a PickList): keys, picking, and a highlight that shows focus."""

from __future__ import annotations

from tests.ui.helpers import SIZE, build_ready, tiny_app
from tui_lab.ui.panes.builder.config_form import ConfigForm
from tui_lab.ui.widgets.preset_list import PresetList


def highlight_background(presets: PresetList) -> object:
    """The background drawn under the highlighted preset's title."""
    y = presets._first_line[presets.highlighted] - presets.scroll_offset.y
    strip = presets.render_line(y)
    return strip._segments[-1].style.bgcolor


async def test_keys_move_the_highlight_and_enter_loads() -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        presets = app.query_one(PresetList)
        presets.focus()
        await pilot.press("home")
        assert presets.highlighted == 0
        await pilot.press("down", "down")
        assert presets.highlighted == 2
        await pilot.press("end")
        assert presets.highlighted == len(presets.presets) - 1
        target = [p.name for p in presets.presets].index("reverse")
        await pilot.press("home", *["down"] * target, "enter")
        await pilot.pause(0.2)
        assert app.config.task.name == "reverse"


async def test_clicking_a_preset_loads_it() -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        presets = app.query_one(PresetList)
        names = [p.name for p in presets.presets]
        # A preset near the top, in view without scrolling (the list outgrew the pane).
        y = presets._first_line[names.index("addition")]
        await pilot.click(PresetList, offset=(3, y + 1))  # +1: the border
        await pilot.pause(0.2)
        assert app.config.task.name == "addition"


async def test_the_highlight_shows_focus() -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        presets = app.query_one(PresetList)
        presets.focus()
        await pilot.pause()
        focused = highlight_background(presets)
        app.query_one(ConfigForm).focus()
        await pilot.pause()
        assert not presets.has_focus
        blurred = highlight_background(presets)
        assert focused != blurred
        presets.focus()
        await pilot.pause()
        assert highlight_background(presets) == focused
