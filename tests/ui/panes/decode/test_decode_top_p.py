"""Pilot test: the Decode pane's top-p control reaches the sampler, its cut is shown, a bad value is flagged."""

from __future__ import annotations

import re
from pathlib import Path

from textual.widgets import Input, Static

from tests.ui.helpers import SIZE, decode, open_trained, plain, tiny_app
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.widgets.text_table import TextTable

TOP_P = 0.5


def survivors(top: list[tuple[str, float]], top_p: float) -> list[str]:
    """Top-p by hand: in order of probability, a token survives while the mass before it is below p."""
    kept, before = [], 0.0
    for token, p in sorted(top, key=lambda tp: tp[1], reverse=True):
        if before < top_p:
            kept.append(token)
        before += p
    return kept


def struck_cells(table: TextTable) -> list[list[str]]:
    """Per row of the steps table, the top-k cells drawn struck through ('token pp%')."""
    rows = []
    for y in range(len(table.text.splitlines())):
        line = list(table.render_line(y))  # the segments drawn on screen, with their styles
        text = "".join(s.text for s in line)
        strike = [bool(s.style and s.style.strike) for s in line for _ in s.text]
        cells = list(re.finditer(r"\S(?:\S| (?! ))*", text))  # cells are 2+ spaces apart
        if cells and cells[0].group() == str(len(rows) + 1):  # a step's row (not the header)
            rows.append([m.group() for m in cells[2:] if all(strike[m.start() : m.end()])])
    return rows


async def test_top_p_cut_is_used_and_bad_values_are_flagged(learned_run: Path) -> None:
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await pilot.press("3")
        pane = app.query_one(DecodePane)
        await pilot.press("ctrl+t")  # sampling on
        pane.query_one("#temperature", Input).value = "1"  # the shown probabilities are the sampler's
        pane.query_one("#top-p", Input).value = str(TOP_P)
        await decode(pilot, "31415")
        result = pane.result
        assert result is not None and result.steps
        table = pane.query_one("#decode-steps", TextTable)
        struck = struck_cells(table)
        assert len(struck) == len(result.steps)
        removed_any = False
        for step, row in zip(result.steps, struck, strict=True):
            keep = survivors(step.top, TOP_P)
            assert step.token in keep  # what was drawn survived the cut
            assert [t for t, _ in step.top if t in keep] == [
                t for (t, _), k in zip(step.top, step.kept, strict=True) if k
            ]
            shown_removed = [cell.split(" ")[0] for cell in row]
            assert shown_removed == [t for t, _ in step.top if t not in keep], (step.top, row)
            removed_any |= bool(shown_removed)
        assert removed_any, "the cut removed no token: pick another top-p or input"

        # Top-p 1 cuts nothing: no token is struck through.
        pane.query_one("#top-p", Input).value = "1"
        await decode(pilot, "31415")
        assert pane.result is not result
        assert all(row == [] for row in struck_cells(table))

        pane.query_one("#top-p", Input).value = "2"
        await decode(pilot, "3141")
        assert "top-p in (0, 1]" in plain(pane.query_one("#decode-error", Static))
