"""An SAE feature switched off in the lab (Features' ``a``) is off in every decode of Decode (3).

The hook's activation becomes the SAE's reconstruction without the feature plus
the reconstruction error; the pane's output is checked against the core's own
greedy decode under the same intervention, worked out here apart from the lab.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from tests.ui.helpers import SIZE, decode, open_trained, plain, tiny_app
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.hook_points import using_hooks
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.sae.interventions import ablation_hooks
from tui_lab.core.sae.recipe import new_sae

HOOK = "encoder.0.hook_resid_post"


def _feature_that_matters(sae, loaded, text: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """A feature whose ablation changes the greedy answer, and that answer (core only)."""
    plain_out = generate(loaded.model, loaded.task, text).output
    for feature in range(sae.cfg.d_sae):
        with using_hooks(ablation_hooks(sae, feature, HOOK)):
            out = generate(loaded.model, loaded.task, text).output
        if out != plain_out:
            return feature, out
    raise AssertionError("no feature of the SAE changes the answer")


async def test_a_feature_switched_off_is_off_in_decode_and_back_on(learned_run: Path) -> None:
    loaded = load_for_inference(learned_run)
    sae = new_sae(loaded.config.model.d_model, 64, "topk", 4, HOOK, str(learned_run), 16, seed=1)
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        plain_out = generate(loaded.model, loaded.task, "31415").output
        feature, without = _feature_that_matters(sae, loaded, "31415")

        assert app.state.ablation.toggle_feature(sae, HOOK, feature, "sae-1")
        pane = await decode(pilot, "31415")
        shown = plain(pane.query_one("#decode-output", Static))
        assert pane.result is not None and pane.result.output == without != plain_out
        assert f"ablated: feature {feature} of sae-1" in shown

        assert not app.state.ablation.toggle_feature(sae, HOOK, feature, "sae-1")  # on again
        pane = await decode(pilot, "31415")
        assert pane.result.output == plain_out
        assert "ablated" not in plain(pane.query_one("#decode-output", Static))
