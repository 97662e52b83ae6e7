"""Pilot tests for the frame: pane keys, text fields, help, palette, quit, small sizes, startup."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from textual.binding import Binding
from textual.command import CommandPalette
from textual.widgets import Input

from tests.ui.helpers import SIZE, plain, ready, tiny_app, type_text, wait_until
from tui_lab.ui import pane_registry
from tui_lab.ui.screens.help import HelpScreen
from tui_lab.ui.widgets.size_notice import SizeNotice


def test_ui_import_does_not_load_torch() -> None:
    """The first frame must not wait for torch: importing the app leaves it unloaded."""
    code = "import sys, tui_lab.ui.app; assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout


async def test_first_frame_before_torch() -> None:
    """Without loading the core the lab still paints Build with the preset and says it loads torch."""
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.active_pane == "build"
        assert app.core is None
        assert "loading torch" in app.core_state


async def test_status_bar_names_the_torch_release_once_loaded() -> None:
    """What the snapshots show as a placeholder: the release this machine really loaded."""
    import torch

    from tests.ui.helpers import plain, ready
    from tui_lab.ui.widgets.status_bar import StatusBar

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert f"torch {torch.__version__.split('+')[0]} ready" in plain(app.query_one(StatusBar))


def highlighted_tab(app: Any) -> str:
    """The text of the tab bar drawn in bold: the pane the bar says is on show."""
    strip = app.query_one("#tabs").render_line(0)
    return "".join(seg.text for seg in strip if seg.style and seg.style.bold).strip()


async def test_number_keys_switch_panes_and_focus_lands() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        expected_focus = {
            "2": ("train", "train-pane"),
            "3": ("decode", "decode-input"),
            "4": ("attention", "heatmap"),
            "5": ("params", "params-table"),
            "1": ("build", "presets"),
        }
        for key, (pane, focus_id) in expected_focus.items():
            if app.in_text_field:
                await pilot.press("escape")
            await pilot.press(key)
            await pilot.pause()
            assert app.active_pane == pane, key
            shown = [w.id for w in app.query_one("#panes").children if w.region.height > 0]
            assert shown == [f"{pane}-pane"], (key, shown)
            assert highlighted_tab(app) == f"{key} {pane.title()}", key
            assert app.focused is not None and app.focused.id == focus_id, (key, app.focused)


async def test_clicking_a_tab_shows_its_pane() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.click("#tabs", offset=(22, 0))  # on " 3 Decode "
        await pilot.pause()
        assert app.active_pane == "decode"
        assert highlighted_tab(app) == "3 Decode"
        assert app.focused is not None and app.focused.id == "decode-input"
        await pilot.click("#tabs", offset=(19, 0))  # the gap between two tabs
        await pilot.pause()
        assert app.active_pane == "decode"


async def test_keys_type_into_text_fields_and_escape_leaves() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("3")
        field = app.query_one("#decode-input", Input)
        assert app.focused is field
        await type_text(pilot, "12q?")
        assert field.value == "12q?"
        assert app.active_pane == "decode"
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not app.in_text_field
        await pilot.press("2")
        assert app.active_pane == "train"


async def test_help_lists_every_binding() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = " ".join(f"{k} {v}" for _, rows in app.screen.sections for k, v in rows)
        from tui_lab.ui.app import LabApp
        from tui_lab.ui.panes.attention.attention_pane import AttentionPane
        from tui_lab.ui.panes.builder.build_pane import BuildPane
        from tui_lab.ui.panes.builder.config_form import ConfigForm
        from tui_lab.ui.panes.decode.decode_pane import DecodePane
        from tui_lab.ui.panes.params.params_pane import ParamsPane
        from tui_lab.ui.panes.train.train_pane import TrainPane

        panes = (LabApp, BuildPane, ConfigForm, TrainPane, DecodePane, AttentionPane, ParamsPane)
        for cls in panes:
            for binding in cls.BINDINGS:
                assert binding.description in text, (cls.__name__, binding.description)
        for word in ("escape", "ctrl+p", "ctrl+q"):
            assert word in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_command_palette_offers_every_binding() -> None:
    """The palette's lab commands come from the bindings: one per pane action, with its key."""
    from tui_lab.ui import pane_registry
    from tui_lab.ui.user_keymap import action_help

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        for spec in pane_registry.PANES:
            owner = type(app.pane(spec.id))  # every pane is mounted once torch is in
            for binding in owner.BINDINGS:
                title = f"{spec.title}: {binding.description}"
                assert title in commands, title
                key = app.get_key_display(Binding(binding.key.split(",")[0], binding.action))
                what = action_help(owner, binding.action)  # the action's docstring
                expected = f"{what} ({key} · {binding.id})"
                assert what and commands[title] == expected, (title, commands[title])
        assert commands["Go to Params"] == "Show the Params pane (5 · app.params)"
        assert commands["Help"] == "Open the help screen listing every binding (? · app.help)"
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await type_text(pilot, "go to params")
        await wait_until(pilot, lambda: palette_offers(app, "Go to Params"), 5, "the match")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.active_pane == "params", 5)
        await pilot.press("ctrl+p")
        await type_text(pilot, "params: group rows")
        await wait_until(pilot, lambda: palette_offers(app, "group rows"), 5, "the match")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.pane("params").grouped, 5, "rows grouped")


def palette_offers(app: Any, text: str) -> bool:
    """The command palette's highlighted match contains ``text`` (its search has answered)."""
    from textual.command import CommandList

    if not isinstance(app.screen, CommandPalette):
        return False
    found = app.screen.query(CommandList)
    if not found:
        return False
    options = found.first()
    index = options.highlighted
    if index is None or options.option_count == 0:
        return False
    prompt = options.get_option_at_index(index).prompt
    return text.lower() in str(getattr(prompt, "plain", prompt)).lower()


async def test_quit_keys() -> None:
    for key in ("q", "ctrl+q"):
        app = tiny_app()
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press(key)
            await pilot.pause()
            assert app.quitting, key


async def test_small_terminal_shows_notice_and_80x24_shows_panes() -> None:
    app = tiny_app()
    async with app.run_test(size=(70, 20)) as pilot:
        await ready(pilot)
        notice = app.query_one(SizeNotice)
        assert notice.display and notice.region.height > 0
        assert "70×20" in plain(notice)
        assert app.query_one("#panes").region.height == 0
    app = tiny_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.query_one(SizeNotice).region.height == 0
        for key in "12345":
            if app.in_text_field:
                await pilot.press("escape")
            await pilot.press(key)
            await pilot.pause()
            focused = app.focused
            assert focused is not None and focused.region.height > 0, key
            assert focused.region.right <= 80 and focused.region.bottom <= 24


async def test_shrinking_to_a_sliver_and_back_keeps_keys_safe() -> None:
    """In a terminal a few rows tall the hidden panes get no keys; growing back restores focus."""
    from tui_lab.ui.widgets.preset_list import PresetList

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert isinstance(app.focused, PresetList)
        await pilot.press("down")
        await pilot.resize_terminal(138, 6)
        await pilot.pause(0.1)
        for key in ("pagedown", "pageup", "down", "enter", "2", "space", "4", "k", "1"):
            await pilot.press(key)
        assert not app.quitting
        await pilot.resize_terminal(*SIZE)
        await pilot.pause(0.1)
        assert app.focused is not None and app.focused.region.height > 0


async def test_hidden_panes_are_drawn_once_out_of_sight() -> None:
    """Each pane is drawn beneath Build as soon as it exists; the screen shows Build throughout."""
    from tui_lab.ui.widgets.pane_tabs import PaneSwitcher

    app = tiny_app(warm_hidden_panes=True)
    async with app.run_test(size=SIZE) as pilot:
        switcher = app.query_one(PaneSwitcher)
        others = ("grad norm", "Examples", "decode yet", "component")
        for _ in range(200):
            await pilot.pause(0.05)
            shown = app.export_screenshot()
            assert "Presets" in shown and not any(word in shown for word in others)
            if app.core is not None and not switcher._warm_queue and len(app.panes) == len(pane_registry.PANES):
                break
        assert not switcher._warm_queue and switcher._warming is None
        assert switcher.drawn_beneath == {f"{p.id}-pane" for p in pane_registry.PANES if p.id != "build"}
        assert app.active_pane == "build" and [p for p in app.panes.values() if p.display] == [
            app.pane("build")
        ]


async def test_hidden_panes_wait_for_torch_and_a_shown_one_is_built_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While torch loads (held here: it never arrives) only Build exists; a pane key builds
    and shows that pane alone; once loaded (``loaded``), the rest are built."""
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.widgets.pane_stand_in import PaneStandIn

    monkeypatch.setattr(LabApp, "_load_core_worker", lambda self: None)
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        assert set(app.panes) == {"build"} and len(app.query(PaneStandIn)) == len(pane_registry.PANES) - 1
        await pilot.press("3")
        await wait_until(pilot, lambda: app.pane("decode") is not None, 30, "the decode pane")
        await pilot.pause(0.2)
        assert app.active_pane == "decode" and app.pane("decode").display
        assert set(app.panes) == {"build", "decode"}
        app.loaded()
        await wait_until(pilot, lambda: len(app.panes) == len(pane_registry.PANES), 30, "every pane")
        assert not app.query(PaneStandIn)


async def test_a_pane_key_during_the_warm_up_shows_that_pane() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await wait_until(pilot, lambda: app.pane("params") is not None, 30, "the params pane")
        await pilot.press("5")
        await pilot.pause(0.2)
        assert app.active_pane == "params"
        assert app.focused is not None and app.focused.id == "params-table"
        assert "component" in app.export_screenshot()
        await ready(pilot)
        assert app.active_pane == "params" and app.pane("params").display
