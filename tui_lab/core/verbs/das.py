"""Distributed alignment search for a task variable at one layer and position class:
the subspace's interchange intervention accuracy with its controls (random subspace,
random labels) and the whole activation swapped; over a run's history, IIA by
layer x step.

``tfx-lab das`` runs it here, the Probes screen's worker calls the same ``run``;
``das`` is the Python face's (``tui_lab.core``). The layer is checked against the
model before any example is run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least, positive
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from tui_lab.core.analysis.probes.das import DasScore
    from tui_lab.core.analysis.probes.probe_history import ProbeHistory
    from tui_lab.core.opening.in_hand import ModelInHand


@dataclass(frozen=True)
class Request:
    """The variable, the layer (0: the embeddings, n: after the last block), the position
    class (default all), the subspace's rank, and the run folder whose history to scan."""

    variable: str
    layer: int
    position: str | None = None
    rank: int = 1
    examples: int = 1000
    pairs: int = 1000
    steps: int = 150
    seed: int = 0
    history: str | None = None
    snapshots: int = 10
    stack: str | None = None  # an encoder-decoder's "encoder" or "decoder" (None: where the variable is)

    def __post_init__(self) -> None:
        if self.stack is not None and self.stack not in ("encoder", "decoder"):
            raise LabError(f"--stack {self.stack}: choose encoder or decoder")
        if not self.variable:
            raise LabError("give a task variable (--variable NAME)")
        at_least("--layer", self.layer, 0)
        positive("--rank", self.rank)
        at_least("--examples", self.examples, 20)
        at_least("--pairs", self.pairs, 8)
        positive("--steps", self.steps)
        positive("--snapshots", self.snapshots)


@dataclass
class Result:
    """The layer's hook and position, the score with its controls, and the history."""

    variable: str
    layer: int
    hook: str
    position: str
    rank: int
    score: DasScore
    history: ProbeHistory | None = None

    def to_json(self) -> JSON:
        return {"variable": self.variable, "layer": self.layer, "hook": self.hook, "position": self.position,
                "rank": self.rank, **self.score.to_dict(),
                "history": None if self.history is None else self.history.to_dict()}


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """DAS at the request's layer and position (and, with a run folder, over its history)."""
    from tui_lab.core.analysis.probes import slot_activations as slots
    from tui_lab.core.analysis.probes.das import das_score
    from tui_lab.core.analysis.probes.das_pairs import frozen, model_forward, plan_pairs
    from tui_lab.core.tasks.variables import find_variable

    slots.check_stack(model, None, request.stack)  # before the variable: the model's shape decides
    task = slots.lab_task(model)
    variable = find_variable(task, request.variable)
    stream = slots.stream_of(model, variable.site, request.stack)
    hooks = slots.layer_hooks(model, stream)
    if request.layer >= len(hooks):
        raise LabError(f"--layer {request.layer}: the {stream} stream has layers 0-{len(hooks) - 1} "
                       f"(0: the embeddings, {len(hooks) - 1}: after the last block)")
    if request.rank > int(model.config.model.d_model):
        raise LabError(f"--rank {request.rank}: more than the residual stream's {model.config.model.d_model} dimensions")
    data = slots.capture(model, slots.variable_slots(model, variable, request.examples, request.seed, request.stack))
    position = slots.resolve_position(data, request.position)
    plan = plan_pairs(task, variable, data, position, request.pairs, request.seed)
    stop_if(cancelled)
    hook = hooks[request.layer]
    train, test = plan.pairs(data, hook)
    progress(0, 1, "fitting the subspace")
    with frozen(model.model):
        score, _ = das_score(model_forward(model, data, hook), train, test, request.rank, steps=request.steps,
                             seed=request.seed, cancelled=cancelled)
    stop_if(cancelled)
    progress(1, 1, "fitted")
    history = None
    if request.history is not None:
        from tui_lab.core.analysis.probes.probe_history import probe_history

        history = probe_history(model.private_copy(), request.history,
                                lambda m: slots.capture(m, slots.variable_slots(m, variable, request.examples,
                                                                                request.seed, request.stack)),
                                position, variable=variable, rank=request.rank, max_snapshots=request.snapshots,
                                seed=request.seed, progress=progress, cancelled=cancelled)
    return Result(request.variable, request.layer, hook, position, request.rank, score, history)


def das(model: ModelInHand | str | Path, variable: str, layer: int, *, position: str | None = None,
        rank: int = 1, examples: int = 1000, pairs: int = 1000, steps: int = 150, seed: int = 0,
        stack: str | None = None) -> Result:
    """DAS for ``variable`` at ``layer`` of ``model`` (a model in hand, or any source
    ``open_model`` opens), in ``stack`` (an encoder-decoder's encoder or decoder)."""
    from tui_lab.core.verbs.probe import in_hand_of

    return run(Request(variable, layer, position, rank, examples, pairs, steps, seed, stack=stack),
               in_hand_of(model))
