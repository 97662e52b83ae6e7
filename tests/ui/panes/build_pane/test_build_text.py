"""Pilot test: the Build form's char-lm text file field is checked inline; a bad file changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events

from tests.ui.helpers import SIZE, build_ready, edit_field, form_settled, tiny_app
from tests.ui.panes.build_pane.test_build import error_text
from tui_lab.ui.panes.builder.config_form import ConfigForm
from tui_lab.ui.panes.builder.form_fields import MIN_TEXT_CHARS


async def paste_field(pilot, key: str, text: str) -> None:  # type: ignore[no-untyped-def]
    """Clear a Build form field and paste ``text`` (typing is covered by the form's own tests)."""
    await edit_field(pilot, key)
    await pilot.press("end", "ctrl+u")
    if text:
        pilot.app.query_one(ConfigForm).post_message(events.Paste(text))
    await pilot.pause()
    await form_settled(pilot)


async def test_text_file_is_checked_inline_and_the_previous_text_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # short relative names: typed key by key
    Path("bin.txt").write_bytes(b"abc\x00def" * 200)
    Path("empty.txt").write_text("")
    Path("small.txt").write_text("a tiny text\n")
    Path("good.txt").write_text("the quick brown fox jumps over the lazy dog\n" * (MIN_TEXT_CHARS // 40 + 1))
    app = tiny_app(load_core=False)  # needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        before = app.config
        assert before.task.text is None
        for name, fragment in [("nope.txt", "no such file"), ("bin.txt", "not a text file"),
                               ("empty.txt", "empty"), ("small.txt", f"at least {MIN_TEXT_CHARS:,}")]:
            await paste_field(pilot, "task.text", name)
            assert fragment in error_text(app, "task.text"), name
            assert app.config == before  # the previous text stays in use
        await paste_field(pilot, "task.text", "good.txt")
        assert error_text(app, "task.text") == ""
        assert app.config.task.text == "good.txt"
        await paste_field(pilot, "task.text", "")
        assert app.config.task.text is None  # empty field: back to Python's help text
