"""Training a sparse autoencoder on a model's activations at a hook (``core/sae/recipe.py``'s
recipe), or continuing one; the folder opens with ``open_sae`` and SAELens.

``tfx-lab sae train`` and the Features pane's ``t`` both run it here. Every number is
refused in one line (NaN, infinity, out of range) when the request is made, and an
occupied or half-asked-for output folder before the model reads anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from tui_lab.core.checks import at_least, positive
from tui_lab.core.errors import LabError
from tui_lab.core.sae import defaults as DEFAULT
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.events import SAEEvent
    from tui_lab.core.sae.sae import SparseAutoencoder
    from tui_lab.core.sae.trainer import SAETrainer

# the command's --arch names and the SAE's architecture each stands for
ARCHS = {"topk": "topk", "relu": "standard", "standard": "standard", "jumprelu": "jumprelu",
         "batchtopk": "batchtopk", "matryoshka": "matryoshka_batchtopk",
         "matryoshka_batchtopk": "matryoshka_batchtopk"}
# the architectures whose --k counts features per token (BatchTopK: on average over a batch)
K_ARCHS = ("topk", "batchtopk", "matryoshka_batchtopk")
LAST = ("l0", "explained_variance", "fvu", "mse", "dead_fraction")  # the summary's step numbers
OnEvent: TypeAlias = "Callable[[SAEEvent], None]"


@dataclass(frozen=True)
class Request:
    """Where to write, at which hook (None: the last residual stream), on which text (None: the
    model's own), the SAE's shape and the training's numbers."""

    out: str
    hook: str | None = None
    text: str | None = None  # a text file, split 90/10 into training and held-out text
    d_sae: int | None = None  # required unless resuming
    arch: str = "topk"
    k: int = DEFAULT.K
    l1: float | None = None  # relu: the L1 coefficient; jumprelu: the L0 coefficient
    tokens: int = DEFAULT.TOKENS
    batch: int = DEFAULT.BATCH
    lr: float = DEFAULT.LR
    seed: int = 0
    resume: bool = False
    device: str = "cpu"
    model_name: str | None = None  # recorded in the SAE's metadata, named in refusals
    score_ce: bool = True  # CE loss recovered on held-out windows at each evaluation
    keep_tokens: int | None = None  # activations kept for the feature table (None: the cache's default)
    widths: tuple[int, ...] | None = None  # matryoshka: prefix sizes (None: d_sae/16, d_sae/4, d_sae)

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise LabError(f"--arch {self.arch}: one of {', '.join(sorted(ARCHS))}")
        if self.d_sae is not None:
            at_least("--d-sae", self.d_sae, 1)
        at_least("--k", self.k, 1)
        if self.d_sae is not None and ARCHS[self.arch] in K_ARCHS and self.k > self.d_sae:
            raise LabError(f"--k: must be <= --d-sae ({self.d_sae}), got {self.k}")
        if self.widths is not None:
            self._check_widths(self.widths)
        if self.l1 is not None:
            at_least("--l1", self.l1, 0)
        at_least("--tokens", self.tokens, 1)
        at_least("--batch", self.batch, 1)
        positive("--lr", self.lr)
        at_least("--seed", self.seed, 0)
        if self.keep_tokens is not None:
            at_least("keep_tokens", self.keep_tokens, 1)

    def _check_widths(self, widths: tuple[int, ...]) -> None:
        """Prefix sizes: for matryoshka only, positive, strictly increasing, the last --d-sae."""
        if ARCHS[self.arch] != "matryoshka_batchtopk":
            raise LabError(f"--widths: only for --arch matryoshka, not {self.arch}")
        if not widths or any(w < 1 for w in widths) or any(a >= b for a, b in zip(widths, widths[1:], strict=False)):
            raise LabError(f"--widths: positive and strictly increasing, such as 64,256,1024; got {widths}")
        if self.d_sae is not None and widths[-1] != self.d_sae:
            raise LabError(f"--widths: the last must be --d-sae ({self.d_sae}), got {widths[-1]}")


@dataclass
class Result:
    """Where the SAE is, how training ended, the last step's numbers; the SAE and its windows
    (the feature table reads them next)."""

    out: str
    hook: str
    step: int
    tokens: int
    reason: str
    seconds: float
    sae: SparseAutoencoder
    windows: Tensor
    last: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {"out": self.out, "hook": self.hook, "step": self.step, "tokens": self.tokens,
                "reason": self.reason, "seconds": round(self.seconds, 2), **self.last}


def check_out(request: Request) -> None:
    """Refuse a fresh run into a folder holding one, or without a feature count (nothing read yet)."""
    from tui_lab.core.sae.checkpoint import STATE_FILE

    if request.resume:
        return
    if (Path(request.out) / STATE_FILE).exists():
        raise LabError(f"--out {request.out} holds an SAE training run: --resume continues it, or choose another")
    if request.d_sae is None:
        raise LabError("--d-sae N: how many features (such as 1024)")


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never,
        on_event: OnEvent | None = None) -> Result:
    """Train (or resume) until the token count, ``cancelled()`` or the text's end; ``on_event``
    sees every training event, ``progress`` the rows trained on."""
    from tui_lab.core.sae.activations import check_width, hook_activations, site_width
    from tui_lab.core.sae.batchtopk import inference_sae
    from tui_lab.core.sae.events import SAEStepEvent
    from tui_lab.core.sae.feature_cache import recorder
    from tui_lab.core.sae.recipe import (
        ce_scorer,
        last_resid,
        read_texts,
        rows_per_pass,
        text_windows,
    )

    check_out(request)
    name = request.model_name or "the model"
    train_text, held_text = read_texts(model, request.text, name)
    hook = request.hook or last_resid(model)
    windows = text_windows(model, train_text)
    width = site_width(model, hook, windows[:1])
    trainer = _trainer(request, hook, width, windows.shape[1])
    check_width(trainer.sae, hook, width)
    last: dict[str, object] = {}

    def seen(event: SAEEvent) -> None:
        if isinstance(event, SAEStepEvent):
            record = event.record()
            last.clear()
            last.update({k: record[k] for k in LAST})
            if "ce_loss_recovered" in event.extra:
                last["ce_loss_recovered"] = event.extra["ce_loss_recovered"]
            progress(event.tokens, event.total_tokens, "training")
        if on_event is not None:
            on_event(event)

    trainer.on_event = seen
    if request.score_ce:
        score = ce_scorer(model, hook, text_windows(model, held_text))
        trainer.evaluate = lambda sae: {"ce_loss_recovered": score(sae).recovered}
    # the first windows' activations are kept for the feature table (sae features, the lab)
    keep = recorder(model, windows, hook) if request.keep_tokens is None else recorder(
        model, windows, hook, request.keep_tokens)
    rows = hook_activations(model, windows, hook, rows_per_pass(windows), epochs=None, seed=request.seed)
    end = trainer.train(keep.wrap(rows), should_stop=cancelled)
    # a BatchTopK SAE as it was written: JumpReLU at its running threshold (what open_sae gives)
    return Result(str(request.out), hook, end.step, end.tokens, end.reason, end.elapsed, inference_sae(trainer.sae),
                  windows, dict(last))


def _trainer(request: Request, hook: str, width: int, context: int) -> SAETrainer:
    """The trainer of a fresh SAE from the request, or of the run in ``out`` (resumed)."""
    from tui_lab.core.sae.recipe import new_sae, train_settings
    from tui_lab.core.sae.trainer import SAETrainer

    if request.resume:
        return SAETrainer.resume(request.out, tokens=request.tokens, device=request.device)
    assert request.d_sae is not None
    sae = new_sae(width, request.d_sae, ARCHS[request.arch], request.k, hook, request.model_name, context,
                  request.device, request.seed, list(request.widths) if request.widths else None,
                  steps=max(1, request.tokens // request.batch))
    coefficient = {} if request.l1 is None else {"l1_coefficient": request.l1, "l0_coefficient": request.l1}
    settings = train_settings(request.tokens, request.batch, request.lr, request.seed, ARCHS[request.arch], **coefficient)
    return SAETrainer(sae, settings, request.out)

