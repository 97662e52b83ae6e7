"""The Jacobian lens (J-lens; Gurnee et al. 2026, TransformerLens 4.3's ``JacobianLens``).

For each layer l below the last, one (d_model, d_model) matrix, the average first-order
effect of layer l's output on the last layer's output (before the final norm)::

    J_l = mean over prompts [ mean over t in V  sum over t' in V, t' >= t  d h_final[t'] / d h_l[t] ]

V is a prompt's valid positions: all but the first ``skip_first`` and the last (which
has no next token), as the reference estimator has it. Target effects are summed for
each source position (causal attention makes the t' < t terms zero); sources and
prompts are averaged. Reading the lens is ``final norm + head`` of ``J_l h``; the logit
lens is J_l = I. The last layer is read as it is, so its row is the model's output.

The estimator is the reference's: per prompt, one forward pass with the prompt repeated
``dim_batch`` times, then one backward pass per block of ``dim_batch`` output dimensions,
each planting a one-hot cotangent for one dimension at every valid target position.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.lenses.lens_data import BatchSource, LensBatch, in_hand, lab_module
from tui_lab.core.analysis.lenses.lens_fit import (
    FitCancelled,
    FitProgress,
    FitReport,
    never,
    quiet,
    stop_if,
)
from tui_lab.core.analysis.lenses.logit_lens import resid_post_names
from tui_lab.core.errors import LabError
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.hook_points import using_hooks

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand


class JacobianLens:
    """``matrices`` (n_layers - 1, d_model, d_model), float32: J_l for layers 0..n_layers-2."""

    kind = "jacobian"

    def __init__(self, matrices: Tensor, n_layers: int, n_prompts: int) -> None:
        self.matrices = matrices.detach().float()
        self.n_layers = n_layers
        self.n_prompts = n_prompts
        self.d_model = int(matrices.size(-1))

    def translate(self, layer: int, stream: Tensor) -> Tensor:
        """``J_layer @ stream`` (the last layer: ``stream`` itself)."""
        if layer == self.n_layers - 1:
            return stream
        m = self.matrices[layer].to(stream.device)
        return stream.float() @ m.T


def _streams_with_graph(module: nn.Module, batch: LensBatch, names: list[str]) -> dict[str, Tensor]:
    """Every layer's output on ``batch``, by hook name, in one graph rooted at the first
    layer's output (made a leaf that asks for its gradient)."""
    captured: dict[str, Tensor] = {}

    def hook(x: Tensor, name: str) -> Tensor:
        if name == names[0]:  # the root: every later layer's output depends on it
            x = x.detach().requires_grad_(True)
        captured[name] = x
        return x

    with torch.enable_grad(), using_hooks([(name, hook) for name in names]):
        batch.forward(module)
    return captured


def stream_width(module: nn.Module) -> int:
    """The residual stream's width of ``module`` (its head's input)."""
    head = module.get_submodule("lm_head")
    assert isinstance(head, nn.Linear)
    return head.in_features


def prompt_jacobians(module: nn.Module, prompt: LensBatch, skip_first: int, dim_batch: int) -> Tensor | None:
    """One prompt's (n_layers - 1, d, d) estimate; None when it has no valid position."""
    names = resid_post_names(module)
    n = prompt.tokens.size(1)
    valid = torch.arange(skip_first, n - 1, device=prompt.tokens.device)
    if valid.numel() == 0:
        return None
    d = stream_width(module)
    out = torch.zeros(len(names) - 1, d, d)
    for start in range(0, d, dim_batch):
        dims = torch.arange(start, min(d, start + dim_batch), device=prompt.tokens.device)
        k = dims.numel()
        batch = LensBatch(prompt.tokens.expand(k, -1), None if prompt.src is None else prompt.src.expand(k, -1),
                          prompt.mask.expand(k, -1))
        captured = _streams_with_graph(module, batch, names)
        final = captured[names[-1]]  # (k, n, d)
        cotangent = torch.zeros_like(final)
        cotangent[torch.arange(k, device=dims.device)[:, None], valid[None, :], dims[:, None]] = 1.0  # row i: dim dims[i] at every valid t'
        grads = torch.autograd.grad(final, [captured[name] for name in names[:-1]], cotangent)
        for layer, g in enumerate(grads):  # g: (k, n, d), row i = d(sum_t' final[t', dims[i]]) / d h_l
            out[layer, dims.cpu()] = g[:, valid].float().mean(dim=1).cpu()
    return out


def fit_jacobian_lens(
    model: ModelInHand | str | Path,
    *,
    text: str | None = None,
    prompts: int = 32,
    skip_first: int = 0,
    dim_batch: int = 64,
    seed: int = 0,
    progress: FitProgress = quiet,
    cancelled: FitCancelled = never,
) -> tuple[JacobianLens, FitReport]:
    """A Jacobian lens for the model in hand, averaged over ``prompts`` prompts of its run's
    data (or windows of ``text``); the lens and how the fit went. ``model``: a model in hand,
    or a source ``open_model`` opens."""
    if prompts < 1:
        raise LabError(f"--prompts {prompts}: at least 1")
    model = in_hand(model)
    module = lab_module(model)
    n_layers = len(resid_post_names(module))
    d = int(model.config.model.d_model)
    started = time.perf_counter()
    total = torch.zeros(max(n_layers - 1, 0), d, d)
    used = 0
    source = BatchSource(model, text, 1, seed)
    with evaluating(module):
        for i in range(prompts if n_layers > 1 else 0):
            stop_if(cancelled)
            prompt = source.next().rows()[0]
            got = prompt_jacobians(module, prompt, skip_first, max(1, dim_batch))
            if got is not None:
                total += got
                used += 1
            progress(i + 1, prompts, f"Jacobian lens: prompt {i + 1}/{prompts}")
    if n_layers > 1 and used == 0:
        raise LabError(f"no prompt is longer than {skip_first + 1} tokens: nothing to fit the Jacobian lens on")
    lens = JacobianLens(total / max(used, 1), n_layers, used)
    return lens, FitReport(used, time.perf_counter() - started, data=source.data)
