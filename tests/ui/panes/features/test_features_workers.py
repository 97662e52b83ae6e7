"""The Features pane's ``x`` and ``v``: the typed text decoded as ``tfx-lab decode`` decodes it
(``core/verbs/decode.py``), then with the feature on show ablated or steered at the SAE's
hook. The worker runs here without the pane, its messages collected."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from tui_lab.core.model.hook_points import HookSpec, using_hooks
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.opening.model_in_hand import ModelInHand
from tui_lab.core.sae.interventions import ablation_hooks, steering_hooks
from tui_lab.core.sae.recipe import new_sae
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.verbs import decode
from tui_lab.ui.panes.features import features_workers as jobs

HOOK = "encoder.0.hook_resid_post"
TEXT = "31415"


def _decode_verb(handle: ModelInHand, hooks: list[HookSpec] | None = None) -> str:
    """What ``tfx-lab decode --max-new 40`` prints, optionally under ``hooks``."""
    request = decode.Request(TEXT, max_new=jobs.DECODE_TOKENS, capture=False)
    if hooks is None:
        return str(decode.run(request, handle).decoded.output)
    with using_hooks(hooks):
        return str(decode.run(request, handle).decoded.output)


def _run(mode: str, handle: ModelInHand, sae: SparseAutoencoder, feature: int, coef: float) -> jobs.Intervened:
    posted: list[Message] = []
    jobs.intervene(posted.append, handle, sae, HOOK, feature, TEXT, mode, coef)
    (message,) = posted
    assert isinstance(message, jobs.Intervened), message
    return message


def test_x_and_v_decode_as_the_decode_verb_with_the_feature_off_or_added(learned_run: Path) -> None:
    handle = jobs.private_handle(load_for_inference(learned_run))
    sae = new_sae(handle.config.model.d_model, 64, "topk", 4, HOOK, str(learned_run), 16, seed=1)
    plain = _decode_verb(handle)
    feature = next(f for f in range(sae.cfg.d_sae)
                   if _decode_verb(handle, ablation_hooks(sae, f, HOOK)) != plain)

    ablated = _run("ablate", handle, sae, feature, 0.0)
    assert (ablated.plain, ablated.feature, ablated.mode) == (plain, feature, "ablate")
    assert ablated.changed == _decode_verb(handle, ablation_hooks(sae, feature, HOOK)) != plain

    steered = _run("steer", handle, sae, feature, 8.0)
    assert steered.plain == plain
    assert steered.changed == _decode_verb(handle, steering_hooks(sae, feature, 8.0, HOOK))


def test_a_feature_past_the_sae_is_one_line(learned_run: Path) -> None:
    handle = jobs.private_handle(load_for_inference(learned_run))
    sae = new_sae(handle.config.model.d_model, 64, "topk", 4, HOOK, str(learned_run), 16, seed=1)
    posted: list[Message] = []
    jobs.intervene(posted.append, handle, sae, HOOK, 64, TEXT, "ablate", 0.0)
    (message,) = posted
    assert isinstance(message, jobs.Failed) and message.text == "feature 64: the SAE has features 0 to 63"
