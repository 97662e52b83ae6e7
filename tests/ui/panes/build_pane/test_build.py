"""Pilot tests for the Build pane: presets, inline validation, live counts, save-as."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static

from tests.ui.helpers import (
    SIZE,
    build_ready,
    edit_field,
    form_settled,
    plain,
    ready,
    set_field,
    tiny_app,
    type_text,
    wait_until,
)
from tui_lab.core.config.lab_config import ConfigError, LabConfig, load_file
from tui_lab.ui.panes.builder.build_pane import BuildPane
from tui_lab.ui.panes.builder.config_form import ConfigForm
from tui_lab.ui.panes.params.params_pane import ParamsPane
from tui_lab.ui.screens.save_preset import SavePresetScreen
from tui_lab.ui.widgets.preset_list import PresetList
from tui_lab.ui.widgets.text_table import TextTable


def error_text(app, key: str) -> str:  # type: ignore[no-untyped-def]
    """The error drawn under ``key``'s field, its wrapped lines joined ('' if none)."""
    lines = app.query_one(ConfigForm).shown_lines()
    return " ".join(text.strip() for kind, k, text in lines if kind == "error" and k == key)


def field_line(app, key: str) -> str:  # type: ignore[no-untyped-def]
    """``key``'s row as drawn: its label and value."""
    lines = app.query_one(ConfigForm).shown_lines()
    return next(text for kind, k, text in lines if kind == "field" and k == key)


def form_lines(app):  # type: ignore[no-untyped-def]
    return app.query_one(ConfigForm).shown_lines()


async def test_config_errors_are_placed_by_their_field_not_their_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The form reads ConfigError's ``field`` and ``reason``; the message text is not parsed."""
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)

        def refuse(field: str | None, reason: str):  # type: ignore[no-untyped-def]
            def with_values(self: LabConfig, values: dict[str, object]) -> LabConfig:
                raise ConfigError("<form>: model.d_model: a decoy", field=field, reason=reason)

            monkeypatch.setattr(LabConfig, "with_values", with_values)

        refuse("train.seed", "too lucky")
        await set_field(pilot, "train.batch_size", "17")
        assert error_text(app, "train.seed") == "↳ too lucky"
        assert error_text(app, "model.d_model") == error_text(app, "train.batch_size") == ""
        refuse("model", "about 1e12 parameters need ~16 TiB")
        await set_field(pilot, "train.batch_size", "18")
        assert app.query_one(ConfigForm).banner == "model: about 1e12 parameters need ~16 TiB"
        refuse(None, "the whole config is wrong")
        await set_field(pilot, "train.batch_size", "19")
        assert app.query_one(ConfigForm).banner == "the whole config is wrong"


async def test_invalid_value_is_flagged_and_nothing_changes() -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        build = app.query_one(BuildPane)
        before = app.config
        await set_field(pilot, "model.d_model", "15")
        assert "not divisible by n_heads=2" in error_text(app, "model.d_model")
        assert app.query_one(ConfigForm).error("model.d_model")
        assert app.config == before and build.config == before
        assert "stale" in plain(app.query_one("#params-title", Static))
        await set_field(pilot, "model.d_model", "abc")
        assert "not a whole number" in error_text(app, "model.d_model")
        await set_field(pilot, "train.lr", "-1")
        assert "train.lr" not in error_text(
            app, "train.lr"
        )  # the message is shown without the source
        assert "positive" in error_text(app, "train.lr")
        await set_field(pilot, "model.d_model", "16")
        await set_field(pilot, "train.lr", "0.002")
        assert error_text(app, "model.d_model") == "" and error_text(app, "train.lr") == ""
        assert app.config.train.lr == 0.002
        assert not app.query_one(ConfigForm).has_errors


async def test_relation_errors_go_to_the_right_field() -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        await edit_field(pilot, "task.name")
        await pilot.press("enter")  # opens the list of tasks
        while "▸ char-lm" not in [t.strip() for kind, _, t in form_lines(app) if kind == "option"]:
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert "char-lm" in field_line(app, "task.name")
        assert "decoder-only" in error_text(app, "task.name")


async def test_a_time_limit_and_a_decay_over_it_from_the_form() -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        assert app.config.train.max_seconds is None and app.config.train.decay_over == "steps"
        await edit_field(pilot, "train.decay_over")
        await pilot.press("right")  # steps -> time
        await form_settled(pilot)
        assert "time" in field_line(app, "train.decay_over")
        assert "needs a time limit" in error_text(app, "train.decay_over")
        assert app.config.train.decay_over == "steps"  # nothing changes while it is wrong
        await set_field(pilot, "train.max_seconds", "90")
        assert error_text(app, "train.decay_over") == ""
        assert app.config.train.max_seconds == 90.0 and app.config.train.decay_over == "time"
        # An empty time limit is no limit; then the decay over time is refused again.
        await edit_field(pilot, "train.decay_over")
        await pilot.press("left")  # time -> steps
        await set_field(pilot, "train.max_seconds", "")
        assert app.config.train.max_seconds is None and not app.query_one(ConfigForm).has_errors
        await set_field(pilot, "train.max_seconds", "0")
        assert "> 0" in error_text(app, "train.max_seconds")


async def test_params_follow_edits_live() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        params = app.query_one(ParamsPane)
        await wait_until(pilot, lambda: params.report is not None, 10, "first count")
        first = params.report.total
        await set_field(pilot, "model.d_model", "32")
        await wait_until(pilot, lambda: params.report.total != first, 10, "recount")
        from tui_lab.core.model.params import parameter_report

        expected = parameter_report(app.config.model, len(app.counter.task_for(app.config.task).vocab)).total
        assert params.report.total == expected
        assert f"{expected:,}" in plain(app.query_one("#summary", Static))
        await pilot.press("5")
        shown = app.query_one("#params-table", TextTable).text
        assert all(row.name in shown and f"{row.params:,}" in shown for row in params.report.rows)
        assert f"{expected:,}" in plain(app.query_one("#params-totals", Static))
        assert app.config.model.d_model == 32
        assert app.query_one(BuildPane).edited


async def test_pick_another_preset() -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        presets = app.query_one(PresetList)
        names = [p.name for p in presets.presets]
        assert "copy" in names and "reverse" in names
        presets.focus()
        presets.highlighted = names.index("reverse")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.config.task.name == "reverse"
        assert "reverse" in field_line(app, "task.name")


async def test_save_as_writes_a_preset(lab_folders: Path) -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        await set_field(pilot, "model.d_ff", "48")
        await pilot.press("escape")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, SavePresetScreen)
        name = app.screen.query_one("#name", Input)
        name.value = ""
        name.focus()
        await type_text(pilot, "my-tiny")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, SavePresetScreen)
        path = lab_folders / "my-presets" / "my-tiny.yaml"
        assert path.is_file()
        saved = load_file(path)
        assert saved.model.d_ff == 48 and saved.model.d_model == 16
        assert "my-tiny" in [p.name for p in app.query_one(PresetList).presets]


async def test_save_as_refuses_bad_names(lab_folders: Path) -> None:
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        screen = app.screen
        screen.query_one("#name", Input).value = "../evil"
        screen.query_one("#name", Input).focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SavePresetScreen)
        assert "letters" in plain(screen.query_one("#save-error", Static))
        await pilot.press("escape")
        assert not isinstance(app.screen, SavePresetScreen)
        assert not (lab_folders / "evil.yaml").exists()


async def test_bad_preset_is_explained_in_the_pane(lab_folders: Path) -> None:
    """A broken user preset: the Build pane itself says why (not only a toast); the form is kept."""
    folder = lab_folders / "my-presets"
    folder.mkdir()
    (folder / "zz-broken.yaml").write_text("model:\n  d_modle: 32\n")
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        before = app.config
        presets = app.query_one(PresetList)
        presets.focus()
        presets.highlighted = [p.name for p in presets.presets].index("zz-broken")
        await pilot.press("enter")
        await pilot.pause()
        app.clear_notifications()
        shown = plain(app.query_one("#preset-error", Static))
        assert "d_modle" in shown and "did you mean" in shown
        assert app.config == before
        presets.highlighted = [p.name for p in presets.presets].index("copy")
        await pilot.press("enter")
        await pilot.pause()
        assert plain(app.query_one("#preset-error", Static)) == ""
