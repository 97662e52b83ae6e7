"""Patching over a run's history: one site's grid at every weight snapshot, so a
circuit can be watched becoming causal as it trains (the Patch pane's history view).

The pair is made once, from the run's last weights' task (the same token ids at
every step); each snapshot is loaded into one model in turn (``load_snapshot``),
patched, and reported through ``progress`` (snapshots done, in all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.analysis.patching.activation_patching import (
    Cancelled,
    PatchingCancelled,
    PatchResult,
    Progress,
    activation_patch,
)
from tui_lab.core.analysis.patching.attribution_patching import attribution_patch
from tui_lab.core.analysis.patching.patch_pair import PatchError, PatchPair
from tui_lab.core.runs.snapshots import list_snapshots, load_snapshot

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand


@dataclass
class HistoryPatching:
    """One result per step, in step order."""

    site: str
    method: str
    steps: list[int] = field(default_factory=list)
    results: list[PatchResult] = field(default_factory=list)

    def cell_curves(self) -> dict[str, list[float]]:
        """Each cell's normalised value over the steps, by ``row:col`` (``L1:H2``)."""
        curves: dict[str, list[float]] = {}
        for result in self.results:
            for r, row in enumerate(result.rows):
                for c, col in enumerate(result.cols):
                    curves.setdefault(f"{row}:{col}", []).append(result.values[r][c])
        return curves

    def to_dict(self) -> dict[str, object]:
        return {"site": self.site, "method": self.method, "steps": self.steps,
                "results": [r.to_dict() for r in self.results]}


def patch_history(
    model: ModelInHand,
    run_dir: str | Path,
    pair: PatchPair,
    site: str = "z",
    *,
    method: str = "exact",
    steps: Sequence[int] | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> HistoryPatching:
    """``site`` patched at each history snapshot of ``run_dir`` (all when ``steps`` is None),
    loading each into ``model`` (a handle opened on that run; its weights are replaced)."""
    found = list_snapshots(run_dir)
    if not found:
        raise PatchError(f"{run_dir}: no history snapshots (train with train.history on)")
    chosen = sorted(found if steps is None else steps)
    run = activation_patch if method == "exact" else attribution_patch
    out = HistoryPatching(site, method)
    for i, step in enumerate(chosen):
        if cancelled is not None and cancelled():
            raise PatchingCancelled("patching cancelled")
        load_snapshot(run_dir, step, model.model)
        out.steps.append(step)
        out.results.append(run(model, pair, site))
        if progress is not None:
            progress(i + 1, len(chosen))
    return out
