"""Attribution patching: activation patching's first-order estimate from one forward
and one backward pass (Nanda 2023; Syed et al. 2023).

The patched metric of a cell is estimated as ``corrupt + (clean - corrupt) . grad``,
the gradient of the corrupted run's logit difference with respect to the cell's
activation. Where the metric is linear in the activation (the final norm's output:
the unembedding is linear) the estimate is exact.

One forward pass runs the clean and the corrupted input side by side (batch of 2)
with gradients on, every site's activations kept in the graph; one backward pass
from the corrupted row's metric gives the gradient at all of them
(``torch.autograd.grad``: the weights' gradients are never computed). The
model's parameters are not touched, so other callers of the same model are not
disturbed. This module owns the gradient-enabled run the handle's
``run_with_cache`` (which detaches) does not give.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tui_lab.core.analysis.activation_patching import (
    PatchResult,
    final_hook,
    grid_values,
    require_decoder_only,
    site_grid,
    site_hook,
    site_layers,
    site_named,
)
from tui_lab.core.analysis.patch_pair import Metric, PatchPair, logit_diff


def run_with_grad_cache(
    model: Any, ids: Tensor, names: list[str], metric_row: int, answer: int, wrong: int | None
) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor]]:
    """One forward over ``ids`` (B, T) keeping ``names``' activations in the graph and
    one backward from row ``metric_row``'s logit difference.

    Returns (each row's logit difference (B,), activations, their gradients), all
    detached. The last hook before the unembedding keeps only the last position.
    """
    acts: dict[str, Tensor] = {}
    last = final_hook(model)
    wanted = set(names)

    def keep(x: Tensor, name: str) -> Tensor | None:
        if name in wanted:
            acts[name] = x
        return x[:, -1:] if name == last else None

    def leaf(x: Tensor, _name: str) -> Tensor | None:
        # Frozen weights leave the embeddings without a graph: start one here.
        return None if x.requires_grad else x.detach().requires_grad_()

    with torch.enable_grad():
        hooks = [("hook_embed", leaf), *((n, keep) for n in sorted(wanted | {last}))]
        logits = model.run_with_hooks(ids, hooks)  # (B, 1, V)
        diffs = logit_diff(logits, answer, wrong)  # (B,)
        order = list(acts)
        grads = torch.autograd.grad(diffs[metric_row], [acts[n] for n in order], allow_unused=True)
    found = {n: (torch.zeros_like(acts[n]) if g is None else g).detach() for n, g in zip(order, grads, strict=True)}
    return diffs.detach(), {n: a.detach() for n, a in acts.items()}, found


def _reduce(layout: str, product: Tensor) -> Tensor:
    """(clean - corrupt) * grad of one layer, summed to its cells: by position (T,),
    by head (H,), by (position, head) (T, H)."""
    if layout == "pos":
        return product.sum(-1)  # (T, d) -> (T,)
    if layout == "head":
        return product.sum((0, 2))  # (T, H, d_head) -> (H,)
    if layout == "head_pos":
        return product.sum(-1)  # (T, H)
    return product.sum((1, 2))  # (H, Tq, Tk) -> (H,)


def attribution_patch(model: Any, pair: PatchPair, site: str = "resid_pre") -> PatchResult:
    """Attribution patching of ``site`` (denoising: corrupted run, clean activations);
    ``raw``: the estimated patched logit differences, ``values`` normalised."""
    require_decoder_only(model, "attribution patching")
    where = site_named(site)
    layers = site_layers(model, where)
    names = sorted({site_hook(model, where, layer) for layer in layers})
    clean_ids, corrupt_ids = pair.ids(model.device)
    ids = torch.cat([clean_ids, corrupt_ids])  # (2, T)
    diffs, acts, grads = run_with_grad_cache(model, ids, names, 1, pair.answer, pair.wrong)
    metric = Metric(float(diffs[0]), float(diffs[1]))
    tokens = [model.task.vocab.label(int(i)) for i in pair.clean]
    clean_cache = {n: a[:1] for n, a in acts.items()}
    grid = site_grid(model, where, clean_cache, tokens)
    per_layer = {
        layer: _reduce(where.layout, (acts[n][0] - acts[n][1]) * grads[n][1])
        for layer in layers
        for n in [site_hook(model, where, layer)]
    }
    estimate = []
    for _r, _c, layer, index in grid.cells:
        cell = per_layer[layer]
        estimate.append(cell[index[1], index[0]] if where.layout == "head_pos" else cell[index[0]])
    raw = metric.corrupt + torch.stack(estimate).float().cpu()
    return PatchResult(
        where.name, "attribution", "denoising", metric.clean, metric.corrupt, grid.rows, grid.cols,
        grid_values(grid, raw, metric.corrupt), grid_values(grid, metric.normalise(raw), 0.0), tokens,
    )


def correlation(a: PatchResult, b: PatchResult) -> float:
    """Pearson correlation of two results' raw cells (exact beside attribution)."""
    x = torch.tensor(a.raw, dtype=torch.float64).flatten()
    y = torch.tensor(b.raw, dtype=torch.float64).flatten()
    x, y = x - x.mean(), y - y.mean()
    denom = float(x.norm() * y.norm())
    return float((x @ y) / denom) if denom > 0 else 0.0
