"""Pilot tests for the Decode and Attention panes, on a run the fixture trained."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static

from tests.ui.helpers import SIZE, decode, open_trained, plain, ready, tiny_app, wait_until
from tui_lab.ui.panes.attention.attention_pane import AttentionPane
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.panes.train.train_pane import TrainPane
from tui_lab.ui.widgets.heatmap import Heatmap
from tui_lab.ui.widgets.text_table import TextTable


async def test_decode_without_a_model_says_what_to_do() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await decode(pilot, "123")
        assert "no model yet" in plain(pane.query_one("#decode-error", Static))


async def test_decode_typed_input(trained_run: Path) -> None:
    """The output line is the model's own answer, not the input echoed above it.

    The committed tiny run never learned to copy (it answers zeros), so its
    answer and the input differ: a pane that showed the input twice fails here.
    """
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "3141")
        assert pane.result is not None and pane.result.input == "3141"
        # The core's greedy decode of the same weights, worked out here apart from the pane.
        from tui_lab.core.decoding.decode import generate
        from tui_lab.core.opening.from_run import load_for_inference

        loaded = load_for_inference(trained_run)
        answer = generate(loaded.model, loaded.task, "3141").output
        assert answer != "3141"
        lines = plain(pane.query_one("#decode-output", Static)).splitlines()
        shown = {line.split(" ", 1)[0]: line.split(" ", 1)[1].strip() for line in lines[:2]}
        assert shown == {"input": "3141", "output": answer}, lines
        assert lines[2].startswith(f"{len(pane.result.steps)} steps")
        assert "✗ expected 3141" in lines[2]  # the copy task's answer, and that this is not it
        steps = pane.query_one("#decode-steps", TextTable).text.splitlines()
        assert len(pane.result.steps) >= 1
        for i, step in enumerate(pane.result.steps, start=1):  # one row per step, in order
            row = next(line for line in steps if line.split()[:1] == [str(i)])
            assert row.split()[1] == step.token.strip() or step.token.isspace()
        # Enter leaves the field so the pane keys work at once.
        assert not isinstance(app.focused, Input)
        await pilot.press("4")
        assert app.active_pane == "attention"


async def test_bad_input_is_explained_inline(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "12a")
        message = plain(pane.query_one("#decode-error", Static))
        assert "outside the vocabulary" in message
        assert app.focused is pane.query_one("#decode-input", Input)


async def test_examples_and_sampling(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await pilot.press("3")
        pane = app.query_one(DecodePane)
        assert pane.examples
        await pilot.press("ctrl+n")
        assert pane.query_one("#decode-input", Input).value == pane.examples[0]
        await pilot.press("ctrl+t")
        assert pane.query_one("#sample").value is True
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert pane.result is not None and pane.result.input == pane.examples[0]


async def test_attention_cycles_kind_layer_head_and_walkthrough(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await decode(pilot, "31415")
        await pilot.press("4")
        pane = app.query_one(AttentionPane)
        heatmap = app.query_one("#heatmap", Heatmap)
        assert app.focused is heatmap
        assert [k for k, _ in pane.kinds] == ["encoder self", "decoder self", "cross"]
        assert pane.capture_name == "encoder.0.self"
        assert heatmap.rows == list("31415") and heatmap.cols == list("31415")
        await pilot.press("k")
        assert pane.capture_name == "decoder.0.self"
        await pilot.press("k")
        assert pane.capture_name == "decoder.0.cross"
        await pilot.press("K")
        assert pane.capture_name == "decoder.0.self"
        await pilot.press("l")  # one layer: stays
        assert pane.layer_index == 0
        await pilot.press("h")
        assert pane.head_index == 1
        await pilot.press("h")
        assert pane.head_index == 0
        # The cursor shows the value under it.
        await pilot.press("k", "down", "right")
        assert heatmap.cursor == (1, 1)
        cursor_line = plain(pane.query_one("#attn-cursor", Static))
        assert f"{heatmap.value:.4f}" in cursor_line
        # All heads overview.
        await pilot.press("a")
        assert pane.overview and pane.query_one("#head-grid").display
        assert "head 2" in plain(pane.query_one("#head-grid", Static))
        await pilot.press("a")
        assert not pane.overview
        # The walkthrough recomputes the row from the model's q, k, v.
        await pilot.press("w")
        await wait_until(pilot, lambda: pane.projections is not None, 30, "q/k/v")
        await pilot.pause()
        text = plain(pane.query_one("#walkthrough", Static))
        assert "softmax" in text and "matches the captured weights" in text
        from tui_lab.core.analysis.basics.walkthrough import walk

        for name in pane.result.attention:
            for head in range(2):
                for row in range(pane.result.attention[name].shape[1]):
                    assert (
                        walk(pane.projections[name], pane.result, name, head, row).max_diff < 1e-4
                    )


async def test_attention_keys_before_any_decode_do_not_crash() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("4")
        for key in ("k", "l", "h", "a", "w", "up", "down", "left", "right", "K", "L", "H"):
            await pilot.press(key)
        heatmap = app.query_one("#heatmap", Heatmap)
        assert heatmap.display and "No decode yet" in plain(heatmap)  # still the empty state
        pane = app.query_one(AttentionPane)
        assert pane.kinds == [] and pane.result is None and not pane.overview
        assert app.active_pane == "attention" and not app.quitting


async def test_decoder_only_model_decodes_and_walks_through() -> None:
    """A GPT-style model (RoPE, two layers) trained in the lab: decode, layers, walkthrough."""
    from tests.ui.conftest import DATA

    app = tiny_app(preset=str(DATA / "tiny-gpt.yaml"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("2", "space")
        train = app.query_one(TrainPane)
        await wait_until(pilot, lambda: train.state == "done", 60, "training")
        pane = await decode(pilot, "1234")
        assert pane.result is not None
        await pilot.press("4")
        attention = app.query_one(AttentionPane)
        assert [k for k, _ in attention.kinds] == ["decoder self"]
        await pilot.press("l")
        assert attention.capture_name == "decoder.1.self"
        await pilot.press("w")
        await wait_until(pilot, lambda: attention.projections is not None, 30, "q/k/v")
        from tui_lab.core.analysis.basics.walkthrough import walk

        result = attention.result
        for name in result.attention:
            for row in range(result.attention[name].shape[1]):
                assert walk(attention.projections[name], result, name, 1, row).max_diff < 1e-4


async def test_follow_mode_shows_another_process_run(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run), follow=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.query_one(TrainPane)
        await wait_until(pilot, lambda: len(pane.history) == 30, 10, "the metrics")
        assert pane.state == "following"
        await pilot.press("2", "space")
        assert pane.state == "following"  # nothing to start: another process trains it


async def test_a_model_that_cannot_be_fetched_is_an_inline_message() -> None:
    """A training process gone before its first checkpoint: Decode says so, the lab goes on."""
    from tui_lab.core.tasks import make_task
    from tui_lab.core.training.remote import RunProcessError

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)

        class Gone:  # a ModelHandle whose process has gone
            config = app.config
            card = None
            step = 3
            task = make_task(app.config.task)

            @property
            def model(self) -> None:
                raise RunProcessError("the training process has ended and left no checkpoint to use")

        pane = app.query_one(DecodePane)
        pane.set_run(Gone())
        pane = await decode(pilot, "123")
        assert "left no checkpoint" in plain(pane.query_one("#decode-error", Static))
        assert not app.quitting and app._exception is None  # the lab is still up


async def test_edit_input_is_offered_only_when_the_input_lacks_the_keys() -> None:
    """After 3 the input has the keys: i types an i; elsewhere in the pane i (or /) goes to it."""
    from tui_lab.ui.widgets.key_bar import KeyBar

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await pilot.pause()
        field = app.query_one("#decode-input", Input)
        assert app.focused is field
        assert "Edit input" not in plain(app.query_one(KeyBar))
        assert "edit_input" not in {b.binding.action for b in app.screen.active_bindings.values()}
        await pilot.press("i")  # a text field types what it is given
        assert field.value == "i"
        field.value = ""
        await pilot.press("escape")  # out of the input, still in the pane
        await wait_until(pilot, lambda: "Edit input" in plain(app.query_one(KeyBar)), 10, "the key bar")
        assert app.focused is not field and app.active_pane == "decode"
        await pilot.press("i")
        assert app.focused is field and field.value == ""
        await pilot.press("escape", "slash")
        assert app.focused is field and field.value == ""


def test_percentages_close_every_probability() -> None:
    from tui_lab.ui.panes.decode.decode_view import percent

    assert [percent(p) for p in (1.0, 0.9951, 0.134, 0.0094, 0.00004)] == [
        "100%",
        "100%",
        "13%",
        "0.9%",
        "<0.1%",
    ]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_top_k_cells_read_apart(trained_run: Path, size: tuple[int, int]) -> None:
    """Each step's token and top-5 are cells of their own, 'token pp%', and fit at 80 columns."""
    import re

    from tui_lab.ui.panes.decode.decode_view import percent

    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=size) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "31415")
        table = pane.query_one("#decode-steps", TextTable)
        header, _, *rows = [line for line in table.text.splitlines() if line.strip()]
        assert re.split(r"\s{2,}", header.strip()) == ["#", "token", "1st", "2nd", "3rd", "4th", "5th"]
        assert len(rows) == len(pane.result.steps)
        for i, (row, step) in enumerate(zip(rows, pane.result.steps, strict=True), start=1):
            cells = re.split(r"\s{2,}", row.strip())  # cells are two or more spaces apart
            shown = [(step.token, step.prob), *step.top[:5]]
            assert cells == [str(i), *(f"{t} {percent(p)}" for t, p in shown)], row
            for cell in cells[1:]:
                assert re.fullmatch(r"\S+ (100|\d{1,2}|\d\.\d|<0\.1)%", cell), cell
        # On screen the cells are drawn as in the text; at 120 columns the whole table fits
        # beside the examples (at 80, wide labels such as ⟨sep⟩ can need a sideways scroll).
        text = table.text.splitlines()
        width = table.scrollable_content_region.width
        if size[0] >= 120:
            assert table.virtual_size.width <= width, table.text
        lines = ["".join(s.text for s in table.render_line(y)).rstrip() for y in range(len(text))]
        assert lines == [line[:width].rstrip() for line in text]
