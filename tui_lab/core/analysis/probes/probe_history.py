"""Probes and DAS over a run's history: by layer x training step, when a variable
becomes readable (a probe's held-out accuracy) and when causal (DAS's IIA).

The slots are drawn once (the same examples at every step); each snapshot
(``history/step-N.safetensors``, at most ``max_snapshots`` spread evenly, the last
always among them) is loaded into the model in hand given (a private copy: its
weights are replaced), its residual stream captured, and a probe fitted at every
layer; with ``das`` on, a subspace is fitted and scored at every layer too (no
controls per cell: ``tfx-lab das`` gives them at one layer). ``readable_from`` is
the first step some layer's probe reaches ``READABLE``; ``causal_from`` the first
some layer's IIA reaches ``CAUSAL``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.analysis.probes.das import das_score
from tui_lab.core.analysis.probes.das_pairs import PairPlan, frozen, model_forward, plan_pairs
from tui_lab.core.analysis.probes.linear_probe import probe_layers
from tui_lab.core.analysis.probes.slot_activations import SlotData
from tui_lab.core.errors import LabError
from tui_lab.core.runs.snapshots import list_snapshots, load_snapshot, thin

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.variables import Variable

READABLE = 0.95
CAUSAL = 0.8
# Per cell (the history fits layers x snapshots subspaces): fewer steps at a higher rate
# (a planted direction is found as well: 40 steps at 0.03 reach what 60 at 0.01 do).
HISTORY_DAS_STEPS = 40
HISTORY_DAS_LR = 0.03


@dataclass
class HistoryGrid:
    """Values by layer (rows) and step (columns), and the first step any layer reached ``threshold``."""

    what: str  # "probe accuracy" or "DAS IIA"
    hooks: list[str]
    steps: list[int]
    values: list[list[float | None]]  # [layer][step]
    threshold: float

    def first_step(self) -> int | None:
        """The first step at which some layer reaches the threshold (None: none does)."""
        for j, step in enumerate(self.steps):
            if any(row[j] is not None and row[j] >= self.threshold for row in self.values):  # type: ignore[operator]
                return step
        return None

    def to_dict(self) -> dict[str, object]:
        return {"what": self.what, "hooks": self.hooks, "layers": list(range(len(self.hooks))),
                "steps": self.steps, "values": self.values, "threshold": self.threshold,
                "first_step": self.first_step()}


@dataclass
class ProbeHistory:
    """The probe grid and (with DAS) the IIA grid of one variable at one position class."""

    position: str
    readable: HistoryGrid
    causal: HistoryGrid | None

    def to_dict(self) -> dict[str, object]:
        return {"position": self.position, "steps": self.readable.steps,
                "probe": self.readable.to_dict(), "readable_from": self.readable.first_step(),
                "das": None if self.causal is None else self.causal.to_dict(),
                "causal_from": None if self.causal is None else self.causal.first_step()}


def history_steps(run_dir: str | Path, max_snapshots: int) -> list[int]:
    """The snapshot steps to visit; LabError (one line) for a run with none."""
    found = list_snapshots(run_dir)
    if not found:
        raise LabError(f"{run_dir}: no history snapshots (train with train.history on)")
    return thin(found, max_snapshots)


def probe_history(
    model: ModelInHand,
    run_dir: str | Path,
    slots: Callable[[ModelInHand], SlotData],
    position: str,
    *,
    variable: Variable | None = None,
    rank: int = 1,
    max_snapshots: int = 10,
    seed: int = 0,
    progress: Callable[[int, int, str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> ProbeHistory:
    """Probe accuracy (and, given ``variable``, DAS IIA) by layer x step at ``position``;
    ``slots(model)`` captures the slots with the weights loaded now. ``model``'s weights
    are replaced: pass a private copy."""
    steps = history_steps(run_dir, max_snapshots)
    probe_rows: list[list[float | None]] = []
    das_rows: list[list[float | None]] = []
    plan: PairPlan | None = None
    hooks: list[str] = []
    for i, step in enumerate(steps):
        if cancelled is not None and cancelled():
            raise LabError("stopped")
        load_snapshot(run_dir, step, model.model)
        data = slots(model)
        hooks = data.hooks
        table = probe_layers(data, seed, classes=[position])
        probe_rows.append([None if row[0] is None else row[0].accuracy for row in table.scores])
        if variable is not None:
            if plan is None:  # the pairs depend on the examples only, not on the weights
                plan = plan_pairs(model.task, variable, data, position, 400, seed)
            das_rows.append(_das_column(model, data, plan, rank, seed, cancelled))
        if progress is not None:
            progress(i + 1, len(steps), f"step {step}")
    readable = HistoryGrid("probe accuracy", hooks, steps, _transpose(probe_rows), READABLE)
    causal = None if variable is None else HistoryGrid("DAS IIA", hooks, steps, _transpose(das_rows), CAUSAL)
    return ProbeHistory(position, readable, causal)


def _das_column(model: ModelInHand, data: SlotData, plan: PairPlan, rank: int, seed: int,
                cancelled: Callable[[], bool] | None) -> list[float | None]:
    column: list[float | None] = []
    with frozen(model.model):
        for hook in data.hooks:
            train, test = plan.pairs(data, hook)
            score, _ = das_score(model_forward(model, data, hook), train, test, rank,
                                 steps=HISTORY_DAS_STEPS, lr=HISTORY_DAS_LR, seed=seed, controls=False,
                                 cancelled=cancelled)
            column.append(score.iia)
    return column


def _transpose(columns: list[list[float | None]]) -> list[list[float | None]]:
    """[step][layer] -> [layer][step]."""
    return [list(row) for row in zip(*columns, strict=True)] if columns else []
