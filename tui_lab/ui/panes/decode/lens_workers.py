"""What the Decode pane's lens switch runs in its thread, Textual-free: a tuned or Jacobian
lens fitted for the model on show (through the lens verb, on the run's own data), and a
lens's readout of the decode on show (per layer: top tokens, KL to the output, top-1
agreement).

A lens is fitted for the weights the decode on show ran on (``key``: the run's own, shared
by an ablated decode; a history snapshot's or a training run's copy are others) and kept by
the widget, so switching back to it, or decoding another input, reads it again without fitting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch-backed: the workers run once torch is loaded
    from torch import nn

    from tui_lab.core.analysis.lenses.lens_file import FittedLens
    from tui_lab.core.analysis.lenses.lens_readout import LensReadout
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.tasks.protocol import Task
    from tui_lab.core.verbs.verb import Cancelled, Progress

KINDS = ("logit", "tuned", "jacobian")
TUNED_STEPS = 150  # the tuned lens the lab fits: 200 steps took 34 s for char-lm on a loaded 2-core machine (bench/lenses.py)
JACOBIAN_PROMPTS = 16
KEPT = 6  # fitted lenses the widget keeps (with the models they read: their storage stays theirs)


def next_kind(kind: str) -> str:
    """The lens after ``kind``: logit, tuned, Jacobian, then logit again."""
    return KINDS[(KINDS.index(kind) + 1) % len(KINDS)]


def key(model: nn.Module, kind: str) -> tuple[int, str]:
    """What a fitted lens is kept under: the weights ``model`` reads (its first tensor's
    storage: an ablated view of the run's model shares it) and the lens's kind."""
    return next(model.parameters()).data_ptr(), kind


def fitted(handle: ModelHandle, model: nn.Module, kind: str, text: str, progress: Progress,
           cancelled: Cancelled) -> FittedLens:
    """A ``kind`` lens fitted on the run's data (the lens verb's ``lens_for``) for the weights
    ``model`` reads: the run's own model (a private copy: it may be training) when ``model``
    shares them, the decode's copy (a history snapshot, a training run's) itself otherwise."""
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.verbs.lens import Request, lens_for
    from tui_lab.ui.state.model_copies import private_in_hand

    if key(model, kind) == key(handle.model, kind):
        in_hand = private_in_hand(handle)
    else:
        device = next(model.parameters()).device
        in_hand = ModelInHand(handle.config, handle.task, model, handle.step, device, [], handle.card)
    request = Request(text or " ", lens=kind, steps=TUNED_STEPS, prompts=JACOBIAN_PROMPTS)
    lens, _ = lens_for(request, in_hand, progress, cancelled)
    assert lens is not None  # a tuned or Jacobian request always fits one
    return lens


def readout(model: nn.Module, task: Task, result: DecodeResult, lens: FittedLens | None) -> LensReadout:
    """``lens`` (None: the logit lens) over ``result``'s decode by ``model``."""
    from tui_lab.core.analysis.lenses.lens_readout import LogitLensMap, readout_of_decode

    return readout_of_decode(model, task, result, lens or LogitLensMap(), top_k=1)
