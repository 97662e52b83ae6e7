"""The Build form's speedrun options and optimizer: each there, off by default, each edit
reaching the config (Muon turned on from the keyboard, QK-norm, a soft-cap, zero init)."""

from __future__ import annotations

from tests.ui.helpers import SIZE, build_ready, edit_field, form_settled, set_field, tiny_app
from tui_lab.ui.panes.builder.config_form import ConfigForm
from tui_lab.ui.panes.builder.form_fields import FIELDS

OPTIONS = ("model.activation", "model.qk_norm", "model.zero_init_proj", "model.logit_softcap",
           "model.tie_embeddings", "train.optimizer", "train.muon_lr")


def test_every_option_is_a_field_with_a_hint() -> None:
    assert all(key in FIELDS and FIELDS[key].hint for key in OPTIONS)
    assert "relu2" in FIELDS["model.activation"].choices and "muon" in FIELDS["train.optimizer"].choices


async def test_muon_and_the_options_are_turned_on_from_the_form() -> None:
    app = tiny_app(load_core=False)  # the form needs no torch
    async with app.run_test(size=SIZE) as pilot:
        await build_ready(pilot)
        form = app.query_one(ConfigForm)
        assert app.config.train.optimizer == "adamw" and not app.config.model.zero_init_proj
        await edit_field(pilot, "train.optimizer")
        await pilot.press("right")  # adamw -> muon
        await form_settled(pilot)
        assert app.config.train.optimizer == "muon"
        await edit_field(pilot, "model.zero_init_proj")
        await pilot.press("space")
        await edit_field(pilot, "model.qk_norm")
        await pilot.press("right")  # none -> head
        await set_field(pilot, "model.logit_softcap", "15")
        assert (app.config.model.zero_init_proj, app.config.model.qk_norm) == (True, "head")
        assert app.config.model.logit_softcap == 15.0
        await set_field(pilot, "model.logit_softcap", "")  # empty: off again
        assert app.config.model.logit_softcap is None
        await set_field(pilot, "train.muon_lr", "-1")
        assert "train.muon_lr" in form.error("train.muon_lr") or "must be" in form.error("train.muon_lr")
