"""An SAE's features as a patching site: which features carry the answer.

Denoising, like every site: the corrupted run, with one feature at a time given its
clean activation at every position. The SAE's reconstruction error is kept, so
nothing but that feature changes at its hook:

    x' = x_corrupt + decode(f') - decode(f_corrupt),   f' = f_corrupt with f_i := f_clean_i

which for the SAE's linear decoder is ``x_corrupt + (f_clean_i - f_corrupt_i) W_dec[i]``.
The cells are the features active in either run (the others change nothing), run
through the same batched engine as the other sites; the result's columns are
those features, largest effect first (``F12``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.patching.activation_patching import (
    Cancelled,
    Cell,
    PatchResult,
    Progress,
    Reading,
    run_cells,
)
from tui_lab.core.analysis.patching.patch_pair import Metric, PatchError, PatchPair, logit_diff
from tui_lab.core.analysis.patching.patch_rows import answer_stack, stack_layers
from tui_lab.core.sae.activations import flat_site
from tui_lab.core.sae.sae import SparseAutoencoder

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand


def _layer(model: ModelInHand, hook: str) -> int:
    """The block a hook lies in (the engine grows its batch there); after the last for the rest."""
    parts = hook.split(".")
    if len(parts) > 2 and parts[1].isdigit():
        return int(parts[1])
    return stack_layers(model, answer_stack(model))


def _write(delta: Tensor, shape: torch.Size) -> Callable[[Tensor], None]:
    def write(rows: Tensor) -> None:
        rows += delta.reshape(shape[1:]).to(rows.dtype)  # every copy of the corrupted input
    return write


def feature_patch(model: ModelInHand, pair: PatchPair, sae: SparseAutoencoder, hook: str | None = None, *,
                  max_rows: int | None = None, progress: Progress | None = None,
                  cancelled: Cancelled | None = None) -> PatchResult:
    """Denoising patching of each active feature of ``sae`` at its hook (``hook``: another)."""
    hook = hook or sae.cfg.metadata.hook_name
    if not hook:
        raise PatchError("the SAE's cfg.json names no hook_name: say which hook")
    target = pair.target_ids(1, model.device)
    clean_ids, corrupt_ids = pair.ids(model.device)
    with torch.no_grad():
        logits, clean = model.run_with_cache(clean_ids, names=[hook], target=target)
        _, corrupt = model.run_with_cache(corrupt_ids, names=[hook], target=target)
        x_clean, x_corrupt = flat_site(clean[hook]), flat_site(corrupt[hook])
        if x_clean.shape[-1] != sae.cfg.d_in:
            raise PatchError(f"the SAE reads d_in={sae.cfg.d_in} but {hook} has width {x_clean.shape[-1]}")
        f_clean, f_corrupt = sae.encode(x_clean), sae.encode(x_corrupt)  # (1, T, d_sae)
        active = ((f_clean != 0) | (f_corrupt != 0)).flatten(0, -2).any(0).nonzero().flatten().tolist()
        if not active:
            raise PatchError("no feature of the SAE fires on either input: nothing to patch")
        base_decoded = sae.decode(f_corrupt)
        deltas = []
        for i in active:
            f = f_corrupt.clone()
            f[..., i] = f_clean[..., i]
            deltas.append(sae.decode(f) - base_decoded)  # (1, T, d_in)
    shape = corrupt[hook].shape
    layer = _layer(model, hook)
    cells = [Cell(layer, hook, _write(d, shape)) for d in deltas]
    base, patched = run_cells(
        model, corrupt_ids, cells, lambda lg: logit_diff(lg[:, None], pair.answer, pair.wrong),
        reading=Reading(pair.position, target), max_rows=max_rows, progress=progress, cancelled=cancelled,
    )
    metric = Metric(float(logit_diff(logits, pair.answer, pair.wrong, pair.position)[0]), float(base[0]))
    raw = patched[:, 0]
    order = sorted(range(len(active)), key=lambda j: -abs(float(raw[j]) - metric.corrupt))
    raw = raw[order]
    return PatchResult(
        "sae", "exact", "denoising", metric.clean, metric.corrupt, [hook], [f"F{active[j]}" for j in order],
        [raw.tolist()], [metric.normalise(raw).tolist()], [model.task.vocab.label(int(i)) for i in pair.clean],
    )
