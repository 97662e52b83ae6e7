"""Linear probes at every layer and position class for a task variable or a user's
label file, with held-out accuracy and a shuffled-label control; a k-sparse probe
over an SAE's features; the same over a run's history.

``tfx-lab probe`` runs it here, the Probes screen's worker calls the same ``run``;
``probe`` and ``probe_history`` are the Python face's (``tui_lab.core``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least, positive
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from tui_lab.core.analysis.probes.linear_probe import ProbeTable
    from tui_lab.core.analysis.probes.probe_history import ProbeHistory
    from tui_lab.core.analysis.probes.slot_activations import SlotData
    from tui_lab.core.analysis.probes.sparse_probe import SparseScore
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.sae import SparseAutoencoder
    from tui_lab.core.tasks.variables import Variable

MIN_EXAMPLES = 20


@dataclass(frozen=True)
class Request:
    """What to probe for (a task ``variable`` or a ``labels`` file), where, and whether over
    the history of the run folder ``history``."""

    variable: str | None = None
    labels: str | None = None
    position: str | None = None  # the position class of the history's heatmap (default all)
    examples: int = 1000
    seed: int = 0
    sae: str | None = None
    k: int = 8
    history: str | None = None
    snapshots: int = 10
    stack: str | None = None  # an encoder-decoder's "encoder" or "decoder" (None: where the variable is)

    def __post_init__(self) -> None:
        if self.stack is not None and self.stack not in ("encoder", "decoder"):
            raise LabError(f"--stack {self.stack}: choose encoder or decoder")
        if (self.variable is None) == (self.labels is None):
            raise LabError("give a task variable (--variable NAME) or a label file (--labels FILE), one of them")
        at_least("--examples", self.examples, MIN_EXAMPLES)
        positive("--k", self.k)
        positive("--snapshots", self.snapshots)
        if self.labels is not None and not Path(self.labels).is_file():
            raise LabError(f"{self.labels}: no such label file")


@dataclass
class Result:
    """The probe table, the sparse probe (with an SAE) and the history (with a run folder)."""

    what: str
    table: ProbeTable
    sparse: SparseScore | None = None
    history: ProbeHistory | None = None

    def to_json(self) -> JSON:
        return {"variable": self.what, **self.table.to_dict(),
                "sparse": None if self.sparse is None else self.sparse.to_dict(),
                "history": None if self.history is None else self.history.to_dict()}


def slot_reader(request: Request, model: ModelInHand) -> tuple[Callable[[ModelInHand, list[str]], SlotData],
                                                                  Variable | None]:
    """(a function capturing the request's slots on a model, with extra hooks; the task
    variable or None): the variable, or the label file and its lengths, checked first."""
    from tui_lab.core.analysis.probes import slot_activations as slots

    if request.variable is not None:
        from tui_lab.core.tasks.variables import find_variable

        variable = find_variable(slots.lab_task(model), request.variable)
        slots.stream_of(model, variable.site, request.stack)  # a stack the model lacks: before any work
        return (lambda m, extra: slots.capture(m, slots.variable_slots(m, variable, request.examples,
                                                                       request.seed, request.stack), extra)), variable
    from tui_lab.core.analysis.probes.labels import check_lengths, read_labels

    assert request.labels is not None
    if request.stack is not None:
        from tui_lab.core.tasks.variables import INPUT

        slots.stream_of(model, INPUT, request.stack)  # a label file is read at the input
    lines = read_labels(request.labels)
    check_lengths(request.labels, lines, lambda text: len(model.task.vocab.encode(text)))
    return (lambda m, extra: slots.label_slots(m, lines, extra)), None


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Probes at every layer and position class (and the sparse probe, and the history)."""
    from tui_lab.core.analysis.probes.linear_probe import probe_layers
    from tui_lab.core.analysis.probes.slot_activations import (
        check_stack,
        resolve_position,
        stream_of,
    )
    from tui_lab.core.tasks.variables import INPUT

    check_stack(model, None, request.stack)  # before the variable: the model's shape decides
    read, variable = slot_reader(request, model)
    sae = _open_sae(request.sae, model)
    extra = [] if sae is None else [_sae_hook(sae)]
    stream = stream_of(model, INPUT if variable is None else variable.site, request.stack)
    if extra and not extra[0].startswith(f"{stream}."):  # before any model work
        what = f"the variable {request.variable}" if request.variable else "the labels"
        raise LabError(f"the SAE reads {extra[0]}, but {what} is read in the {stream} stream")
    data = read(model, extra)
    position = resolve_position(data, request.position)
    stop_if(cancelled)
    n_classes = len(data.classes()) + (1 if len(data.classes()) > 1 else 0)
    done = [0]

    def tick() -> None:
        done[0] += 1
        progress(done[0], len(data.hooks) * n_classes, "probes")
        stop_if(cancelled)

    table = probe_layers(data, request.seed, tick=tick)
    sparse = None
    if sae is not None:
        from tui_lab.core.analysis.probes.sparse_probe import sparse_probe

        mask = data.mask(position)
        sparse = sparse_probe(sae, data.resid[extra[0]][mask], data.value[mask], data.example[mask],
                              extra[0], request.k, request.seed)
    history = None
    if request.history is not None:
        history = _history(request, model, read, position, None, progress, cancelled)
    what = request.variable if request.variable is not None else str(request.labels)
    return Result(what, table, sparse, history)


def _history(request: Request, model: ModelInHand, read: Callable[[ModelInHand, list[str]], SlotData],
             position: str, variable: Variable | None, progress: Progress, cancelled: Cancelled) -> ProbeHistory:
    from tui_lab.core.analysis.probes.probe_history import probe_history as over_history

    assert request.history is not None
    return over_history(model.private_copy(), request.history, lambda m: read(m, []), position,
                        variable=variable, max_snapshots=request.snapshots, seed=request.seed,
                        progress=progress, cancelled=cancelled)


def _open_sae(source: str | None, model: ModelInHand) -> SparseAutoencoder | None:
    if source is None:
        return None
    from tui_lab.core.sae.source import open_sae

    return open_sae(source, device=model.device)


def _sae_hook(sae: SparseAutoencoder) -> str:
    hook = sae.cfg.metadata.hook_name
    if not hook:
        raise LabError("the SAE's cfg.json names no hook_name: cannot tell where it reads")
    return str(hook)


def probe(model: ModelInHand | str | Path, variable: str | None = None, *, labels: str | None = None,
          position: str | None = None, examples: int = 1000, seed: int = 0, sae: str | None = None,
          k: int = 8, stack: str | None = None) -> Result:
    """Probes for ``variable`` (or a ``labels`` file) at every layer of ``model`` (a model in
    hand, or any source ``open_model`` opens), in ``stack`` (an encoder-decoder's encoder or decoder)."""
    request = Request(variable, labels, position, examples, seed, sae, k, stack=stack)
    return run(request, in_hand_of(model))


def probe_history(run_dir: str | Path, variable: str, *, position: str | None = None, das: bool = False,
                  rank: int = 1, examples: int = 1000, snapshots: int = 10, seed: int = 0,
                  stack: str | None = None, progress: Progress = no_progress,
                  cancelled: Cancelled = never) -> ProbeHistory:
    """Probe accuracy (and with ``das``, DAS IIA) by layer x step over ``run_dir``'s history."""
    from tui_lab.core.analysis.probes.probe_history import probe_history as over_history
    from tui_lab.core.analysis.probes.slot_activations import resolve_position

    request = Request(variable, None, position, examples, seed, history=str(run_dir), snapshots=snapshots,
                      stack=stack)
    model = in_hand_of(run_dir)
    read, found = slot_reader(request, model)
    where = resolve_position(read(model, []), position)
    return over_history(model, run_dir, lambda m: read(m, []), where, variable=found if das else None,
                        rank=rank, max_snapshots=snapshots, seed=seed, progress=progress, cancelled=cancelled)


def in_hand_of(model: ModelInHand | str | Path) -> ModelInHand:
    from tui_lab.core.opening.in_hand import ModelInHand

    if isinstance(model, ModelInHand):
        return model
    from tui_lab.core.opening.model_in_hand import open_model

    return open_model(model)
