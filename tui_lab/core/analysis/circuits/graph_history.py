"""The same prompt's attribution graph at each history snapshot of a run.

``tfx-lab transcoder train --history`` writes one transcoder set per snapshot under
``DIR/step_<N>/``; each graph opens the run at that step (``open_model(run,
at_step=N)``) with that step's set, so the user steps through training and sees the
circuit's path appear. A folder without ``step_<N>`` sets is one set for every step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tui_lab.core.analysis.circuits.attribution import attribute
from tui_lab.core.analysis.circuits.feature_labels import label_features
from tui_lab.core.analysis.circuits.graph import AttributionGraph
from tui_lab.core.errors import LabError
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import TranscoderSet, open_transcoders

_STEP = re.compile(r"^step_(\d+)$")
OpenAt = Callable[[int | None], ModelInHand]
Progress = Callable[[int, int, str], None]
Cancelled = Callable[[], bool]


def history_steps(folder: Path) -> list[int]:
    """The steps with a set of their own under ``folder`` (``step_<N>/``), in order."""
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if p.is_dir() and (m := _STEP.match(p.name)))


def set_folder(folder: Path, step: int | None) -> Path:
    """The transcoder set for ``step``: ``folder/step_<step>`` when the folder holds
    per-step sets (refused in one line when that step has none), else ``folder``."""
    steps = history_steps(folder)
    if not steps:
        return folder
    if step is None:
        raise LabError(f"{folder} holds a set per history step ({_listed(steps)}): choose one with --at-step")
    if step not in steps:
        raise LabError(f"{folder} has no transcoders for step {step} (it has {_listed(steps)})")
    return folder / f"step_{step}"


def _listed(steps: list[int]) -> str:
    return ", ".join(str(s) for s in steps[:8]) + (" ..." if len(steps) > 8 else "")


@dataclass(frozen=True)
class StepGraph:
    """One snapshot's graph and the set it was traced through."""

    step: int
    graph: AttributionGraph
    transcoders: TranscoderSet
    model: ModelInHand


def graph_at(open_at: OpenAt, folder: Path, step: int | None, text: str, max_feature_nodes: int | None,
             progress: Progress, cancelled: Cancelled) -> StepGraph:
    """The graph of ``text`` at ``step`` (None: the run's last weights) with its set."""
    model = open_at(step)
    tset = open_transcoders(set_folder(folder, step), model)
    graph = attribute(model, text, tset, max_feature_nodes=max_feature_nodes, progress=progress, cancelled=cancelled)
    label_features(graph, model, tset, graph.prune().node_mask.nonzero().flatten().tolist())
    return StepGraph(model.step if step is None else step, graph, tset, model)
