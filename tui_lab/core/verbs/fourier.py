"""A modular-addition model's embedding spectrum: its power per frequency, its key
frequencies and its top-8 share.

``tfx-lab fourier`` runs ``run``; the Fourier screen's worker takes the same spectrum
of a snapshot or the live model through ``spectrum_of``. A model of another task is
refused in one line by the core's ``model_spectrum``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.analysis.lenses.embedding_fourier import Spectrum
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task


@dataclass(frozen=True)
class Request:
    """Nothing to choose: the whole spectrum of the input embedding."""


@dataclass
class Result:
    """The spectrum with the step of the model it was taken from."""

    spectrum: Spectrum
    step: int

    def to_json(self) -> JSON:
        return {**self.spectrum.to_dict(), "step": self.step}


def spectrum_of(model: nn.Module, task: Task) -> Spectrum:
    """The spectrum of ``model``'s input embedding (a bare module: a snapshot or the live model)."""
    from tui_lab.core.analysis.lenses.embedding_fourier import model_spectrum

    return model_spectrum(model, task)


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Take the spectrum of the model in hand's input embedding."""
    stop_if(cancelled)
    spec = spectrum_of(model.model, model.task)
    progress(1, 1, "embedding spectrum")
    return Result(spec, model.step)
