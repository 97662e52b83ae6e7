"""Fitting a tuned lens: each layer's translator trained so that its readout matches the
model's output distribution.

The loss is tuned-lens's KL objective: at every real position, KL(output || layer l's
translated readout), summed over layers (each translator sees only its own term).
The model is only read: its streams are taken without gradients, and the gradients
of the loss are asked for the translators alone (``torch.autograd.grad``), so no
gradient is ever stored on the model's weights, which other workers may share.
Adam with a linear warm-up and a cosine decay; gradient norm clipped at 1 as in
tuned-lens's train loop.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.lenses.lens_data import BatchSource, LensBatch, in_hand, lab_module
from tui_lab.core.analysis.lenses.lens_fit import (
    FitCancelled,
    FitProgress,
    FitReport,
    never,
    quiet,
    stop_if,
)
from tui_lab.core.analysis.lenses.logit_lens import layer_streams, lens_logits, resid_post_names
from tui_lab.core.analysis.lenses.tuned_lens import TunedLens
from tui_lab.core.errors import LabError
from tui_lab.core.eval_mode import evaluating

# Steps each batch serves: 4 took half the time of 1 on the char-lm preset for the same
# KL on fresh batches (bench/lenses.py, RESULTS.md).
REUSE = 4

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.opening.in_hand import ModelInHand


def fit_tuned_lens(
    model: ModelInHand | str | Path,
    *,
    text: str | None = None,
    steps: int = 200,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    lens: TunedLens | None = None,
    reuse: int = REUSE,
    progress: FitProgress = quiet,
    cancelled: FitCancelled = never,
) -> tuple[TunedLens, FitReport]:
    """A tuned lens for the model in hand, trained for ``steps`` steps on its run's data
    (or windows of ``text``, a file's contents), from ``lens`` when given (else the identity);
    the lens and how the fit went. ``model``: a model in hand, or a source ``open_model`` opens.
    Each batch's streams serve ``reuse`` steps in a row (the model's forward pass is most of a
    step's cost; the translators are small)."""
    if steps < 1:
        raise LabError(f"--steps {steps}: at least 1")
    model = in_hand(model)
    module = lab_module(model)
    if lens is None:
        lens = TunedLens(int(model.config.model.d_model), len(resid_post_names(module)))
    lens = lens.to(model.device)
    started = time.perf_counter()
    report = FitReport(0, 0.0)
    params: list[Tensor] = list(lens.parameters())
    if not params:  # one layer: its row is the output itself, nothing to fit
        return lens, report
    opt = torch.optim.Adam(params, lr=lr)
    warmup = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    source = BatchSource(model, text, batch_size, seed)
    read: tuple[list[Tensor], Tensor] | None = None
    for step in range(steps):
        stop_if(cancelled)
        if read is None or step % max(1, reuse) == 0:
            read = _streams(module, source.next())
        loss = _step(module, lens, *read, params, opt)
        sched.step()
        report.losses.append(loss)
        progress(step + 1, steps, f"tuned lens: step {step + 1}/{steps}, loss {loss:.4f}")
    report.done, report.seconds, report.data = steps, time.perf_counter() - started, source.data
    return lens, report


def _streams(module: nn.Module, batch: LensBatch) -> tuple[list[Tensor], Tensor]:
    """Every layer's output at ``batch``'s real positions, (N, d) each, and the output's
    log-probabilities (N, V): what the translators are fitted to."""
    with torch.no_grad(), evaluating(module):
        streams = [s[batch.mask] for s in layer_streams(module, lambda: batch.forward(module))]
        return streams, lens_logits(module, streams[-1]).log_softmax(dim=-1)


def _step(module: nn.Module, lens: TunedLens, streams: list[Tensor], target: Tensor, params: list[Tensor],
          opt: torch.optim.Optimizer) -> float:
    """One optimiser step; the summed KL over the layers before it."""
    p = target.exp()
    loss = torch.zeros((), device=target.device)
    for layer, h in enumerate(streams[:-1]):
        logp = lens_logits(module, lens.translate(layer, h)).log_softmax(dim=-1)
        loss = loss + (p * (target - logp)).sum(dim=-1).mean()
    grads = torch.autograd.grad(loss, params)
    for param, grad in zip(params, grads, strict=True):
        param.grad = grad
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())
