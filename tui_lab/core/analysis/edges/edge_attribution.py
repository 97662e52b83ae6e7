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

from dataclasses import dataclass
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


@dataclass
class _Gradients:
    """The readers' mean gradient over the IG points (T, R, d), and what the first forward
    also gave: the clean and corrupted runs' writers (2, T, W, d) and metric (2,)."""

    grads: Tensor
    writers: Tensor
    metric: Tensor


def _ig_gradients(net: DecoderOnly, g: ComponentGraph, pair: PatchPair, inputs: Tensor, steps: int,
                  progress: Progress | None, cancelled: Cancelled | None) -> _Gradients:
    """The readers' gradients averaged over the ``steps`` IG points from the corrupted
    (``inputs[1]``) towards the clean (``inputs[0]``) embeddings. The first forward also
    carries the clean input as its row 0 (its metric is not differentiated), so the
    writers of both runs come with no forward of their own: the first IG point is the
    corrupted run itself."""
    alphas = torch.arange(steps, device=inputs.device, dtype=inputs.dtype) / steps
    total: Tensor | None = None
    writers = metric = inputs
    for start in range(0, steps, IG_CHUNK):
        stop_if(cancelled)
        a = alphas[start : start + IG_CHUNK].view(-1, 1, 1)
        points = inputs[1:2] + a * (inputs[0:1] - inputs[1:2])
        first = start == 0
        rows = (torch.cat([inputs[0:1], points]) if first else points).detach().requires_grad_()
        with torch.enable_grad():
            run = edge_forward(net, g, rows, pair)
            grads = torch.autograd.grad(run.metric[int(first):].sum(), run.reader_inputs)
        if first:
            writers, metric = run.writers[:2].detach(), run.metric[:2].detach()
        part = run.reader_grads(list(grads))[int(first):].sum(0)  # (T, R, d)
        total = part if total is None else total + part
        if progress is not None:
            progress(min(start + IG_CHUNK, steps), steps, "gradients")
    assert total is not None
    return _Gradients(total / steps, writers, metric)


def _scores(g: ComponentGraph, diff: Tensor, grads: Tensor) -> Tensor:
    """(W, R): ``sum_t diff[t, w] . grads[t, r]`` on the edges that exist, one block per layer
    of readers (the writers before it only: half the products of the whole matrix)."""
    scores = torch.zeros(g.n_writers, g.n_readers, dtype=diff.dtype, device=diff.device)
    flat_w = diff.transpose(0, 1).reshape(g.n_writers, -1)  # (W, T * d)
    flat_r = grads.transpose(0, 1).reshape(g.n_readers, -1)  # (R, T * d)
    for layer in range(g.n_layers + 1):
        first = layer * g.per_layer_readers
        last = g.n_readers if layer == g.n_layers else first + g.per_layer_readers
        n = int(g.allowed[:, first:last].any(1).nonzero().max()) + 1  # writers that feed them
        scores[:n, first:last] = flat_w[:n] @ flat_r[first:last].T
    return torch.where(g.allowed.to(scores.device), scores, 0.0)


def attribute(net: DecoderOnly, pair: PatchPair, ig_steps: int = 1, device: torch.device | str = "cpu",
              progress: Progress | None = None, cancelled: Cancelled | None = None) -> EdgeScores:
    """EAP (``ig_steps`` 1) or EAP-IG scores of every edge of ``net`` over ``pair``."""
    if ig_steps < 1:
        raise EdgeError(f"--ig-steps: must be at least 1, got {ig_steps}")
    g = graph_of(net)
    clean_ids, corrupt_ids = pair.ids(device)
    with torch.no_grad():
        inputs = embed(net, torch.cat([clean_ids, corrupt_ids]))  # (2, T, d)
    found = _ig_gradients(net, g, pair, inputs, ig_steps, progress, cancelled)
    diff = found.writers[0] - found.writers[1]  # (T, W, d)
    scores = _scores(g, diff, found.grads).float().cpu()
    metric = found.metric.cpu()
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
