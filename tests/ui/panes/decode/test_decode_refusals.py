"""Pilot test: a sampling number the Decode pane's form lets through (NaN, infinity) is refused
by the decode verb's request in one line under the input, and nothing is decoded."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static

from tests.ui.helpers import SIZE, decode, open_trained, plain, tiny_app
from tui_lab.ui.panes.decode.decode_pane import DecodePane


@pytest.mark.parametrize(("field", "typed", "says"), [
    ("#temperature", "nan", "--temperature: must be a finite number, got nan"),
    ("#temperature", "inf", "--temperature: must be a finite number, got inf"),
])
async def test_a_number_past_the_form_is_refused_by_the_verb(learned_run: Path, field: str, typed: str,
                                                             says: str) -> None:
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await pilot.press("3")
        pane = app.query_one(DecodePane)
        await pilot.press("ctrl+t")  # sampling on
        pane.query_one(field, Input).value = typed
        await decode(pilot, "31415")
        said = plain(pane.query_one("#decode-error", Static))
        assert says in said and len(said.strip().splitlines()) == 1
        assert pane.result is None
