"""The Build form's keys and mouse: typing, leaving a field, choices, switches, tab, clicks."""

from __future__ import annotations

from tests.ui.helpers import (
    SIZE,
    build_ready,
    edit_field,
    form_settled,
    set_field,
    tiny_app,
    type_text,
    wait_until,
)
from tui_lab.ui.panes.builder.config_form import ConfigForm
from tui_lab.ui.panes.builder.line_edit import LineEdit


def shown(form: ConfigForm, key: str) -> str:
    """``key``'s row as drawn."""
    return next(t for kind, k, t in form.shown_lines() if kind == "field" and k == key)


def test_line_edit_keys() -> None:
    edit = LineEdit()
    edit.set("256")
    assert edit.caret == 3
    edit.key("left")
    edit.insert("0")
    assert (edit.text, edit.caret) == ("2506", 3)
    edit.key("backspace")
    assert (edit.text, edit.caret) == ("256", 2)
    edit.key("home")
    edit.key("delete")
    assert (edit.text, edit.caret) == ("56", 0)
    edit.key("end")
    edit.insert("1e\n3")  # a pasted line break is dropped
    assert edit.text == "561e3"
    edit.key("left")
    edit.key("ctrl+u")
    assert (edit.text, edit.caret) == ("3", 0)
    edit.key("ctrl+k")
    assert edit.text == ""
    edit.key("backspace")  # at the start: nothing to delete
    assert (edit.text, edit.caret) == ("", 0)
    assert not edit.key("x")


async def test_typing_edits_a_number_and_escape_gives_the_keys_back() -> None:
    app = tiny_app(load_core=False)  # the form needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        await edit_field(pilot, "model.d_ff")
        assert app.in_text_field
        await pilot.press("end", "ctrl+u")
        await type_text(pilot, "35q?")  # none of these switch panes, quit or open help
        assert form.text("model.d_ff") == "35q?"
        assert app.active_pane == "build" and len(app.screen_stack) == 1
        assert "35q?" in shown(form, "model.d_ff")
        await form_settled(pilot)
        assert "not a whole number" in form.error("model.d_ff")
        await pilot.press("left", "left", "delete", "delete")
        assert form.text("model.d_ff") == "35"
        await form_settled(pilot)
        assert form.error("model.d_ff") == "" and app.config.model.d_ff == 35
        await pilot.press("escape")
        assert app.focused is form and not app.in_text_field
        await pilot.press("down")  # still moves the cursor
        assert form.cursor_key == "model.dropout"
        await pilot.press("2")
        assert app.active_pane == "train"


async def test_enter_moves_on_and_resumes_editing() -> None:
    app = tiny_app(load_core=False)  # the form needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        await set_field(pilot, "train.steps", "40")
        await pilot.press("enter")
        assert form.cursor_key == "train.batch_size"
        await pilot.press("escape", "enter")
        assert app.in_text_field
        await type_text(pilot, "0")
        assert form.text("train.batch_size").endswith("0")


async def test_choices_cycle_open_and_pick() -> None:
    app = tiny_app(load_core=False)  # the form needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        await edit_field(pilot, "train.schedule")
        assert not app.in_text_field  # 1-5 still switch panes on a choice
        first = form.text("train.schedule")
        await pilot.press("right")
        await form_settled(pilot)
        second = form.text("train.schedule")
        assert second != first and app.config.train.schedule == second
        await pilot.press("left")
        await form_settled(pilot)
        assert app.config.train.schedule == first
        await pilot.press("enter")  # the list opens on the current choice
        options = [t.strip() for kind, _, t in form.shown_lines() if kind == "option"]
        assert f"▸ {first}" in options and len(options) >= 2
        await pilot.press("down", "escape")  # escape closes it, nothing changes
        assert not [1 for kind, _, _ in form.shown_lines() if kind == "option"]
        assert form.text("train.schedule") == first
        assert form.has_focus  # escape closed the list only
        await pilot.press("enter", "down", "enter")
        await form_settled(pilot)
        assert app.config.train.schedule == options[options.index(f"▸ {first}") + 1]


async def test_a_switch_toggles_with_space() -> None:
    app = tiny_app(load_core=False)  # the form needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        before = app.config.model.tie_embeddings
        await edit_field(pilot, "model.tie_embeddings")
        await pilot.press("space")
        await form_settled(pilot)
        assert app.config.model.tie_embeddings is (not before)
        assert ("[x]" in shown(form, "model.tie_embeddings")) is (not before)


async def test_tab_walks_the_fields_then_leaves_the_form() -> None:
    app = tiny_app(load_core=False)  # the form needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        await edit_field(pilot, "train.seed")
        await pilot.press("tab")
        assert form.cursor_key == "train.device" and form.has_focus
        await pilot.press("tab")
        assert not form.has_focus
        await pilot.press("shift+tab")
        assert form.has_focus and form.cursor_key == "train.device"


async def test_clicking_a_field_edits_it_and_the_cursor_stays_in_view() -> None:
    app = tiny_app(load_core=False)  # the form needs no torch
    async with app.run_test(size=(80, 24)) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        await pilot.click(ConfigForm, offset=(3, 3))
        assert form.has_focus and app.in_text_field
        clicked = form.cursor_key
        assert clicked != "model.arch"
        await edit_field(pilot, "train.device")  # far below the fold at 80x24
        lines = form.shown_lines()
        y = next(
            i for i, (kind, k, _) in enumerate(lines) if kind == "field" and k == "train.device"
        )

        def in_view() -> bool:  # the form scrolls just after the next refresh
            top = form.scroll_offset.y
            return top <= y < top + form.scrollable_content_region.height

        await wait_until(pilot, in_view, 10, "the field scrolled into view")
