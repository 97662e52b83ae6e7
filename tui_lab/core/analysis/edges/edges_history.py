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


@dataclass
class EdgesHistory:
    """Per snapshot, in step order: the final circuit's recovered fraction at ``percent`` and its CPR."""

    percent: float
    steps: list[int] = field(default_factory=list)
    recovered: list[float] = field(default_factory=list)
    cpr: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"percent": self.percent, "steps": self.steps, "recovered": self.recovered, "cpr": self.cpr}


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
    out = EdgesHistory(percent)
    for i, step in enumerate(chosen):
        stop_if(cancelled)
        load_snapshot(run_dir, step, copy.model)
        f = faithfulness(copy, pair, final, percents)
        out.steps.append(step)
        out.recovered.append(f.at(percent))
        out.cpr.append(f.cpr)
        if progress is not None:
            progress(i + 1, len(chosen), "snapshots")
    return out
