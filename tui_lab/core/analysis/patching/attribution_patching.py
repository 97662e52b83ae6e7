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

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.patching.activation_patching import (
    PatchResult,
    grid_values,
    layer_rows,
    row_tokens,
    site_grid,
    site_named,
)
from tui_lab.core.analysis.patching.patch_pair import Metric, PatchPair, logit_diff
from tui_lab.core.analysis.patching.patch_rows import final_hook

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand


def run_with_grad_cache(
    model: ModelInHand, ids: Tensor, names: list[str], metric_row: int, pair: PatchPair
) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor]]:
    """One forward over ``ids`` (B, T) keeping ``names``' activations in the graph and
    one backward from row ``metric_row``'s logit difference (read where ``pair`` says).

    Returns (each row's logit difference (B,), activations, their gradients), all
    detached. The last hook before the unembedding keeps only the answer's position.
    """
    acts: dict[str, Tensor] = {}
    last = final_hook(model)
    wanted = set(names)
    keep_at = slice(-1, None) if pair.position == -1 else slice(pair.position, pair.position + 1)

    def keep(x: Tensor, name: str) -> Tensor | None:
        if name in wanted:
            acts[name] = x
        return x[:, keep_at] if name == last else None

    def leaf(x: Tensor, _name: str) -> Tensor | None:
        # Frozen weights leave the embeddings without a graph: start one here.
        return None if x.requires_grad else x.detach().requires_grad_()

    embeds = [n for n in model.hook_names() if n.endswith("hook_embed")]
    with torch.enable_grad():
        hooks = [*((n, leaf) for n in embeds), *((n, keep) for n in sorted(wanted | {last}))]
        logits = model.run_with_hooks(ids, hooks, target=pair.target_ids(ids.size(0), model.device))
        diffs = logit_diff(logits, pair.answer, pair.wrong)  # (B,): one position is left
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


def attribution_patch(model: ModelInHand, pair: PatchPair, site: str = "resid_pre", stack: str | None = None
                      ) -> PatchResult:
    """Attribution patching of ``site`` (denoising: corrupted run, clean activations);
    ``raw``: the estimated patched logit differences, ``values`` normalised."""
    where = site_named(site)
    rows = layer_rows(model, where, stack)
    names = sorted({r.hook for r in rows})
    clean_ids, corrupt_ids = pair.ids(model.device)
    ids = torch.cat([clean_ids, corrupt_ids])  # (2, T)
    diffs, acts, grads = run_with_grad_cache(model, ids, names, 1, pair)
    metric = Metric(float(diffs[0]), float(diffs[1]))
    tokens = row_tokens(model, pair, rows)
    grid = site_grid(model, where, rows, {n: a[:1] for n, a in acts.items()}, tokens)
    per_hook = {n: _reduce(where.layout, (acts[n][0] - acts[n][1]) * grads[n][1]) for n in names}
    estimate = []
    for r, _c, index in grid.cells:
        cell = per_hook[grid.hooks[r]]
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
