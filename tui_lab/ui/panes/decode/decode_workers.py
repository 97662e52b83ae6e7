"""What the Decode pane's thread workers run, Textual-free: a decode with the model in hand
(a copy while it trains, the lab's heads switched off, steered beside it when steering is on),
and the steering vector from two prompt sets.

The pane's ``@work`` methods call these and post what comes back; a failure is raised
as it is and said by the pane in one line.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.opening.model_handle import opened_from_files
from tui_lab.ui.panes.decode.decode_view import TOP_K_SHOWN, Steered
from tui_lab.ui.panes.decode.steering import Steering
from tui_lab.ui.state.decoding import decode_text, fills_masks

if TYPE_CHECKING:  # torch-backed: the workers run once torch is loaded
    from torch import nn

    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.core.verbs.steer import Steering as SteerRequest
    from tui_lab.ui.state.ablation import AblationState

# New tokens a real model (``--model``) continues a text with: its context may be
# thousands of tokens, which would take minutes on a CPU (the lab's own tasks stop
# at their end-of-sequence long before their context).
REAL_MODEL_NEW_TOKENS = 32

DecodeOptions = dict[str, float | int]  # ``generate``'s keyword arguments (``Decoded.options``)


@dataclass(frozen=True)
class Outcome:
    """A decode done: its result, the model it ran on, the options used, its steered twin."""

    result: DecodeResult | FillMaskResult
    model: nn.Module
    options: DecodeOptions
    steered: Steered | None = None


def options_for(run: ModelHandle, temperature: float, top_k: int, top_p: float) -> DecodeOptions:
    """The decode's options: the sampling ones (not for fill-mask), a real model's token cap."""
    fill = fills_masks(run)
    options: DecodeOptions = {"report_k": TOP_K_SHOWN}
    if not fill:
        options.update(temperature=temperature, top_k=top_k, top_p=top_p)
    if opened_from_files(run) and not fill:
        options["max_new_tokens"] = REAL_MODEL_NEW_TOKENS
    return options


def input_loss_note(run: ModelHandle, model: nn.Module, result: DecodeResult, ablated: str) -> str | None:
    """The loss of a real language model on the typed text (with the heads off, and with none
    off); None for a translator, whose input is not text it predicts."""
    from tui_lab.core.analysis.heads.text_ablation import text_ids, text_loss
    from tui_lab.core.errors import LabError

    if run.task.name == "translation":
        return None
    try:
        ids = text_ids(run.task, result.input, run.config.model.max_len)
    except LabError:
        return "loss on the input: one token, nothing to predict"
    loss = text_loss(model, ids)
    if not ablated:
        return f"loss on the input: {loss:.3f} nats/token over {len(ids) - 1} predictions"
    base = text_loss(run.model, ids)
    return f"loss on the input with {ablated} off: {loss:.3f} nats/token ({base:.3f} with every head on, {loss - base:+.3f})"


def decode_in_hand(
    run: ModelHandle,
    text: str,
    options: DecodeOptions,
    *,
    snapshot: bool,
    ablation: AblationState,
    steering: Steering | None,
) -> Outcome:
    """Decode ``text`` with ``run``'s model (a copy if ``snapshot``: it is training); an
    encoder-only model fills the masks in ``text`` instead (``decode_text``)."""
    from tui_lab.ui.state.model_copies import settled

    fill = fills_masks(run)
    # Fetching the weights can fail too (a training process that has ended
    # before its first checkpoint): the pane says so inline, like bad input.
    settled(run)  # an opened model re-laid in the background: done first
    model = copy.deepcopy(run.model) if snapshot else run.model
    model, ablated = ablation.apply(model, run, copied=snapshot, text=text)
    result = decode_text(model, run.task, text, options)
    ablation.mark(result, ablated)
    steered: Steered | None = None
    if steering is not None:  # the same decode with the vector added: shown beside it
        from tui_lab.core.model.hook_points import using_hooks

        with using_hooks(steering.hooks()):
            steered = (id(result), steering.label, decode_text(model, run.task, text, options).output)
    note = input_loss_note(run, model, result, ablated) if opened_from_files(run) and not fill else None
    if note:  # no right answer to check: how well it predicts the text instead
        result.notes.append(note)
    return Outcome(result, model, options, steered)


def steering_of(request: SteerRequest, handle: ModelInHand) -> Steering:
    """The steering ``request`` asks for: its vector from the two prompt sets (``core/verbs/steer.py``)."""
    from tui_lab.core.verbs.steer import vector as steering_vector

    return Steering(request.hook, steering_vector(request, handle), request.coef)
