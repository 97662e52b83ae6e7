"""Edge attribution: EAP and EAP-IG scores of every edge of a decoder-only model.

EAP (Syed et al. 2023) scores an edge w -> r by the first-order estimate of what
delivering the writer's clean output to that one reader would do to the metric:

    score(w -> r) = (clean_w - corrupt_w) . d metric / d input_r

summed over positions. Convention (denoising, as the Patch pane's attribution
patching and TransformerLens 4.3's ``attribution_patch``): the gradient is taken on
the corrupted run, so a positive score means the clean edge restores the answer,
and a writer's outgoing scores sum to its node's attribution patching score.

EAP-IG (Hanna et al. 2024) averages that gradient over ``ig_steps`` points on the
straight path from the corrupted to the clean input embeddings (the ``input``
writer), at alpha = k / ig_steps for k = 0 .. ig_steps - 1 (a left Riemann sum
starting at the corrupted run: one step is EAP exactly); the writers'
differences stay those of the clean and corrupted runs.

Exact edge patching, the slow reference, is ``edge_patching.exact_edge_scores``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.edges.component_graph import (
    Cancelled,
    ComponentGraph,
    EdgeError,
    Progress,
    stop_if,
)
from tui_lab.core.analysis.edges.edge_forward import decoder_of, edge_forward, embed, graph_of
from tui_lab.core.analysis.edges.edge_scores import EdgeScores
from tui_lab.core.analysis.patching.patch_pair import Metric, PatchPair
from tui_lab.core.model.models import DecoderOnly

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand

METHODS = ("eap", "eap-ig", "exact")
IG_CHUNK = 8  # IG points per forward: memory stays that of a batch of 8


def _ig_gradients(net: DecoderOnly, g: ComponentGraph, pair: PatchPair, inputs: Tensor, steps: int,
                  progress: Progress | None, cancelled: Cancelled | None) -> Tensor:
    """(T, R, d): the readers' gradients averaged over the ``steps`` IG points from the
    corrupted (``inputs[1]``) towards the clean (``inputs[0]``) embeddings."""
    alphas = torch.arange(steps, device=inputs.device, dtype=inputs.dtype) / steps
    total: Tensor | None = None
    for start in range(0, steps, IG_CHUNK):
        stop_if(cancelled)
        a = alphas[start : start + IG_CHUNK].view(-1, 1, 1)
        points = (inputs[1:2] + a * (inputs[0:1] - inputs[1:2])).detach().requires_grad_()
        with torch.enable_grad():
            run = edge_forward(net, g, points, pair)
            grads = torch.autograd.grad(run.metric.sum(), run.reader_inputs)
        part = run.reader_grads(list(grads)).sum(0)  # (T, R, d)
        total = part if total is None else total + part
        if progress is not None:
            progress(min(start + IG_CHUNK, steps), steps, "gradients")
    assert total is not None
    return total / steps


def attribute(net: DecoderOnly, pair: PatchPair, ig_steps: int = 1, device: torch.device | str = "cpu",
              progress: Progress | None = None, cancelled: Cancelled | None = None) -> EdgeScores:
    """EAP (``ig_steps`` 1) or EAP-IG scores of every edge of ``net`` over ``pair``."""
    if ig_steps < 1:
        raise EdgeError(f"--ig-steps: must be at least 1, got {ig_steps}")
    g = graph_of(net)
    clean_ids, corrupt_ids = pair.ids(device)
    with torch.no_grad():
        inputs = embed(net, torch.cat([clean_ids, corrupt_ids]))  # (2, T, d)
        base = edge_forward(net, g, inputs, pair)
    grads = _ig_gradients(net, g, pair, inputs, ig_steps, progress, cancelled)
    diff = base.writers[0] - base.writers[1]  # (T, W, d)
    scores = torch.einsum("twd,trd->wr", diff.double(), grads.double()).float()
    scores = torch.where(g.allowed.to(scores.device), scores, 0.0).cpu()
    metric = base.metric.detach().cpu()
    method = "eap" if ig_steps == 1 else "eap-ig"
    return EdgeScores(g, scores, method, float(metric[0]), float(metric[1]))


def edge_attribution(model: ModelInHand, pair: PatchPair, method: str = "eap", ig_steps: int = 5,
                     progress: Progress | None = None, cancelled: Cancelled | None = None) -> EdgeScores:
    """Every edge's score over ``pair``: ``eap``, ``eap-ig`` (``ig_steps`` points) or ``exact``
    (one patched forward per edge: slow, the reference)."""
    if method not in METHODS:
        raise EdgeError(f"unknown method {method!r}: eap, eap-ig or exact")
    net = decoder_of(model.model)
    if method == "exact":
        from tui_lab.core.analysis.edges.edge_patching import exact_edge_scores

        return exact_edge_scores(net, pair, model.device, progress, cancelled)
    return attribute(net, pair, 1 if method == "eap" else ig_steps, model.device, progress, cancelled)


def metric_of(scores: EdgeScores) -> Metric:
    """The clean and corrupted logit differences the scores were measured between."""
    return Metric(scores.clean, scores.corrupt)
