"""Reading every layer through a lens: the logit lens, a tuned lens or a Jacobian lens.

``tfx-lab lens`` runs ``run``: the lens (opened from ``lens_file``, else fitted on the
run's data or a text file, and saved to ``out`` when asked) over the greedy decode of
the input, per layer its top tokens, KL to the output and top-1 agreement. A lens that
was fitted is also scored beside the logit lens on fresh batches (``held_out``: drawn
with a seed the fit never uses; for a text file, other windows of the same text, which
may overlap the ones it was fitted on).
The Decode pane's lens switch calls ``lens_for`` from its worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import (
    JSON,
    Cancelled,
    Progress,
    check_text,
    never,
    no_progress,
    stop_if,
)

if TYPE_CHECKING:
    from tui_lab.core.analysis.lenses.lens_file import FittedLens
    from tui_lab.core.analysis.lenses.lens_fit import FitReport
    from tui_lab.core.analysis.lenses.lens_readout import LayerScore, LensReadout
    from tui_lab.core.opening.in_hand import ModelInHand

KINDS = ("logit", "tuned", "jacobian")
HELD_OUT_BATCHES = 4  # batches of 32 the fitted lens and the logit lens are scored on
HELD_OUT_SEED = 1_000_003  # never a seed the fit draws its batches from


@dataclass(frozen=True)
class Request:
    """``lens``: logit, tuned or jacobian; ``lens_file`` opens a saved one, else it is fitted
    (``steps`` for a tuned lens, ``prompts`` for a Jacobian one) on the run's data or the
    text file ``text``, and saved to ``out`` when given; ``top_k`` tokens per layer and step."""

    input: str
    lens: str = "logit"
    lens_file: str | None = None
    text: str | None = None
    steps: int = 200
    prompts: int = 32
    out: str | None = None
    top_k: int = 5
    seed: int = 0
    max_new: int | None = None

    def __post_init__(self) -> None:
        if not self.input:
            raise LabError("empty input: give some text")
        if self.lens not in KINDS:
            raise LabError(f"--lens {self.lens!r}: one of {', '.join(KINDS)}")
        if self.lens == "logit" and (self.lens_file or self.text or self.out):
            raise LabError("--lens logit has nothing to fit, open or save (--lens-file, --text, --out)")
        if self.lens_file is not None and (self.text is not None or self.out is not None):
            raise LabError("--lens-file opens a fitted lens: --text and --out go with fitting one")
        at_least("--steps", self.steps, 1)
        at_least("--prompts", self.prompts, 1)
        at_least("--top", self.top_k, 1)
        if self.max_new is not None:
            at_least("--max-new", self.max_new, 1)

    @property
    def fits(self) -> bool:
        """Whether the lens is fitted here (a tuned or Jacobian lens with no file to open)."""
        return self.lens != "logit" and self.lens_file is None


@dataclass
class Result:
    """The readout; for a fitted lens how the fit went, where it was saved, and its scores
    per layer on fresh batches (the lens's beside the logit lens's)."""

    readout: LensReadout
    fit: FitReport | None = None
    saved: str | None = None
    held_out: list[tuple[LayerScore, LayerScore]] | None = None

    def to_json(self) -> JSON:
        out: JSON = dict(self.readout.to_json())
        out["fit"] = None if self.fit is None else {**self.fit.to_json(), "saved": self.saved}
        out["held_out"] = None if self.held_out is None else [
            {"layer": mine.layer, "kl": round(mine.kl, 6), "agreement": round(mine.agreement, 6),
             "logit_kl": round(logit.kl, 6), "logit_agreement": round(logit.agreement, 6)}
            for mine, logit in self.held_out
        ]
        return out


def lens_for(request: Request, model: ModelInHand, progress: Progress = no_progress,
             cancelled: Cancelled = never) -> tuple[FittedLens | None, FitReport | None]:
    """The lens ``request`` names (None: the logit lens) and, when it was fitted, its report."""
    if request.lens == "logit":
        return None, None
    if request.lens_file is not None:
        from tui_lab.core.analysis.lenses.lens_file import open_lens

        lens = open_lens(request.lens_file, model)
        if lens.kind != request.lens:
            raise LabError(f"--lens-file {request.lens_file}: a {lens.kind} lens, not a {request.lens} one")
        return lens, None
    from tui_lab.core.analysis.lenses.lens_data import read_lens_text

    text = None if request.text is None else read_lens_text(model, request.text)
    if request.lens == "tuned":
        from tui_lab.core.analysis.lenses.tuned_lens_training import fit_tuned_lens

        return fit_tuned_lens(model, text=text, steps=request.steps, seed=request.seed,
                              progress=progress, cancelled=cancelled)
    from tui_lab.core.analysis.lenses.jacobian_lens import fit_jacobian_lens

    return fit_jacobian_lens(model, text=text, prompts=request.prompts, seed=request.seed,
                             progress=progress, cancelled=cancelled)


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Open or fit the lens, save it when asked, read the input's decode through it."""
    from tui_lab.core.analysis.lenses.lens_data import lab_module
    from tui_lab.core.analysis.lenses.lens_readout import lens_readout

    check_text(model, request.input, "the input")
    lab_module(model)  # an encoder-only model is refused before any fitting
    lens, fit = lens_for(request, model, progress, cancelled)
    stop_if(cancelled)
    saved = None
    if lens is not None and fit is not None and request.out is not None:
        from tui_lab.core.analysis.lenses.lens_file import save_lens

        saved = str(save_lens(lens, request.out, model, fit.to_json()))
    readout = lens_readout(model, request.input, lens, request.top_k, request.max_new)
    held_out = None if lens is None or fit is None else _held_out(model, lens, request)
    return Result(readout, fit, saved, held_out)


def _held_out(model: ModelInHand, lens: FittedLens, request: Request) -> list[tuple[LayerScore, LayerScore]]:
    """Per layer, the fitted lens's and the logit lens's scores on data the fit never drew."""
    from tui_lab.core.analysis.lenses.lens_data import lens_batches, read_lens_text
    from tui_lab.core.analysis.lenses.lens_readout import LogitLensMap, held_out_scores

    text = None if request.text is None else read_lens_text(model, request.text)
    batches = lens_batches(model, text, HELD_OUT_BATCHES, 32, HELD_OUT_SEED)
    return list(zip(held_out_scores(model, lens, batches), held_out_scores(model, LogitLensMap(), batches), strict=True))
