"""The Build form's encoder-only shape: encoder-only and masked-lm offered, checked as the
core's config checks them (inline, never a crash), and a model built from the form trains
and fills masks."""

from __future__ import annotations

from tests.ui.conftest import TINY_MLM
from tests.ui.helpers import (
    SIZE,
    build_ready,
    decode,
    edit_field,
    form_settled,
    ready,
    tiny_app,
    wait_until,
)
from tui_lab.core.config import lab_config as cfg
from tui_lab.ui.panes.builder.config_form import ConfigForm
from tui_lab.ui.panes.builder.form_fields import FIELDS
from tui_lab.ui.panes.train.train_pane import TrainPane

# What the core says when arch and task disagree (lab_config.LabConfig's cross-section check).
MISMATCH = "an encoder-only model trains on masked-lm, and masked-lm needs model.arch: encoder-only"


def test_the_form_offers_the_shape_and_its_task() -> None:
    assert "encoder-only" in FIELDS["model.arch"].choices == cfg.ARCHS
    assert "masked-lm" in FIELDS["task.name"].choices
    assert "encoder-only" in FIELDS["model.arch"].hint and "masked-lm" in FIELDS["task.text"].hint


async def test_arch_and_task_are_checked_together_inline() -> None:
    app = tiny_app(load_core=False)  # the copy preset; the form needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        await edit_field(pilot, "model.arch")
        for _ in cfg.ARCHS:  # cycle to it (at most once round)
            if form.text("model.arch") == "encoder-only":
                break
            await pilot.press("right")
        await form_settled(pilot)
        assert form.error("task.name") == MISMATCH  # copy is not an encoder's task
        assert app.config.model.arch != "encoder-only"  # the last valid config stands
        await edit_field(pilot, "task.name")
        for _ in cfg.TASKS:
            if form.text("task.name") == "masked-lm":
                break
            await pilot.press("right")
        await form_settled(pilot)
        # masked-lm's windows (64) do not fit the copy preset's context (16): said, not crashed
        assert form.error("task.name") == "" and "too short for this task" in form.banner
        assert app.active_pane == "build"


async def test_an_encoder_built_in_the_form_trains_and_fills_masks() -> None:
    app = tiny_app(preset=str(TINY_MLM))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        form = app.query_one(ConfigForm)
        assert (form.text("model.arch"), form.text("task.name")) == ("encoder-only", "masked-lm")
        await edit_field(pilot, "model.arch")
        await pilot.press("left")  # decoder-only: its embedding norm (and masked-lm) refuse it
        await form_settled(pilot)
        assert form.error("model.arch") == "embed_norm, type_vocab_size and position_offset need encoder-only"
        assert app.config.model.arch == "encoder-only"
        await pilot.press("right")
        await form_settled(pilot)
        assert form.error("model.arch") == "" and not form.banner
        await pilot.press("escape", "2", "space")
        pane = app.query_one(TrainPane)
        await wait_until(pilot, lambda: pane.state == "done", 60, "the run to finish")
        assert pane.reason == "finished" and pane.run.config.model.arch == "encoder-only"
        decoded = await decode(pilot, "th_ cat")
        assert decoded.result is not None and len(decoded.result.masks) == 1
