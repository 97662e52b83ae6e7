"""The final circuit's faithfulness over a run's history: watching a circuit become the mechanism.

The edges are scored once, on the run's final weights (the model as opened); at
every history snapshot the same edges' top k% circuit is kept, the rest corrupted,
and its recovered fraction measured on that snapshot's weights (with the CPR of
the whole curve). The pair is the same token ids at every step. Snapshots are
loaded into a private copy of the model, so the caller's model is never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.analysis.edges.component_graph import Cancelled, EdgeError, Progress, stop_if
from tui_lab.core.analysis.edges.edge_scores import EdgeScores
from tui_lab.core.analysis.edges.faithfulness import PERCENTS, faithfulness
from tui_lab.core.analysis.patching.patch_pair import PatchPair
from tui_lab.core.runs.snapshots import list_snapshots, load_snapshot

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand


# A snapshot whose clean and corrupted runs differ by less than this share of the final model's
# logit difference does not tell the pair apart yet: a fraction of that gap is noise there
# (the induction run's first 64 steps: gaps of 0.1-0.8 against 27, fractions from -1.2 to +0.7).
READABLE_GAP = 0.05


@dataclass
class EdgesHistory:
    """Per snapshot, in step order: the final circuit's recovered fraction at ``percent``, its
    CPR and the snapshot's own logit difference between the clean and corrupted runs (``gap``);
    ``final_gap``: the final model's."""

    percent: float
    steps: list[int] = field(default_factory=list)
    recovered: list[float] = field(default_factory=list)
    cpr: list[float] = field(default_factory=list)
    gap: list[float] = field(default_factory=list)
    final_gap: float = 0.0

    def readable(self, share: float = READABLE_GAP) -> tuple[list[int], list[float]]:
        """(steps, recovered fractions) of the snapshots whose gap is at least ``share`` of the final one."""
        keep = [i for i, g in enumerate(self.gap) if abs(g) >= share * abs(self.final_gap)]
        return [self.steps[i] for i in keep], [self.recovered[i] for i in keep]

    def to_dict(self) -> dict[str, object]:
        return {"percent": self.percent, "steps": self.steps, "recovered": self.recovered, "cpr": self.cpr,
                "gap": self.gap, "final_gap": self.final_gap}


def edges_history(model: ModelInHand, run_dir: str | Path, pair: PatchPair, final: EdgeScores,
                  percent: float = 10.0, steps: Sequence[int] | None = None, progress: Progress | None = None,
                  cancelled: Cancelled | None = None) -> EdgesHistory:
    """``final``'s top ``percent``% circuit measured at each snapshot of ``run_dir`` (all when
    ``steps`` is None); EdgeError in one line when the run keeps no history."""
    found = list_snapshots(run_dir)
    if not found:
        raise EdgeError(f"{run_dir}: no history snapshots (train with train.history on)")
    chosen = sorted(found if steps is None else steps)
    percents = tuple(sorted({*PERCENTS, percent}))
    copy = model.private_copy()
    out = EdgesHistory(percent, final_gap=final.clean - final.corrupt)
    for i, step in enumerate(chosen):
        stop_if(cancelled)
        load_snapshot(run_dir, step, copy.model)
        f = faithfulness(copy, pair, final, percents)
        out.steps.append(step)
        out.recovered.append(f.at(percent))
        out.cpr.append(f.cpr)
        out.gap.append(f.clean - f.corrupt)
        if progress is not None:
            progress(i + 1, len(chosen), "snapshots")
    return out
