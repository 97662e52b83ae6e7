"""What the Patch pane's workers run, Textual-free: a private handle on the model in hand,
the pair, a site's grid (exact or attribution), direct logit attribution, the atlas's
labels, and the same grid at every history snapshot.

Each function takes ``progress(done, total)`` and ``cancelled()`` where the core does,
so the pane's worker reports and stops between forward passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.atlas import HeadScore
    from tui_lab.core.analysis.heads.head_curves import ScoreCurves
    from tui_lab.core.analysis.lenses.direct_logit_attribution import DlaResult
    from tui_lab.core.analysis.patching.activation_patching import PatchResult
    from tui_lab.core.analysis.patching.patch_pair import PatchPair
    from tui_lab.core.analysis.patching.patching_history import HistoryPatching
    from tui_lab.core.config.shape import Shape
    from tui_lab.core.opening.model_card import ModelCard
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task
    from tui_lab.core.verbs.patch import Request as PatchRequest

Progress = Callable[[int, int], None]
Cancelled = Callable[[], bool]


@dataclass(frozen=True)
class PairSource:
    """Where the pair comes from: a ready-made pair's ``name`` (None: the model's first), or
    (``custom``) the four typed texts."""

    name: str | None = None
    clean: str = ""
    corrupt: str = ""
    answer: str = ""
    wrong: str = ""
    custom: bool = False
    target: str = ""  # an encoder-decoder's decoder input after its start token (none: empty)


def private_handle(run: ModelHandle) -> ModelInHand:
    """``run`` as a model in hand of its own (``model_copies.private_in_hand``: a lab run's
    model copied whole, a model opened from files sharing its weights)."""
    from tui_lab.ui.state.model_copies import private_in_hand

    return private_in_hand(run)


@dataclass(frozen=True)
class RunFacts:
    """What ``ready_pairs`` reads of a model: its shape, card and task (a lab run's, read
    without touching its model: it may be training)."""

    shape: Shape
    card: ModelCard | None
    task: Task


def ready_names(handle: ModelInHand | ModelHandle) -> list[str]:
    """The ready-made pairs this model takes (the core's names); ``handle``: the model in hand,
    or the lab's run (its shape, card and task read; its model left as it is: it may be training)."""
    from tui_lab.core.analysis.patching.patch_pair import ready_pairs
    from tui_lab.core.opening.model_in_hand import ModelInHand

    if isinstance(handle, ModelInHand):
        return list(ready_pairs(handle))
    facts = RunFacts(handle.config.model.shape, handle.card, handle.task)
    return list(ready_pairs(cast("ModelInHand", facts)))  # ready_pairs reads only these three


def request_of(source: PairSource) -> PatchRequest:
    """``source`` as the patch verb's request (its pair fields only)."""
    from tui_lab.core.verbs.patch import Request

    if source.custom:
        return Request(clean=source.clean, corrupt=source.corrupt, answer=source.answer, wrong=source.wrong,
                       target=source.target or None)
    return Request(pair=source.name)


def make_pair(handle: ModelInHand, source: PairSource) -> PatchPair:
    """The ``PatchPair`` of ``source`` as ``tfx-lab patch`` makes it (``core/verbs/patch.py``):
    PatchError, one line, for bad input; typed text past the context refused before it is read."""
    from tui_lab.core.verbs.patch import pair_of

    return pair_of(request_of(source), handle)


def pair_texts(handle: ModelInHand, pair: PatchPair) -> PairSource:
    """The pair's four fields as text, to show in the inputs."""
    vocab = handle.task.vocab

    def text(ids: list[int]) -> str:
        return vocab.decode(ids, stop_at_eos=False)

    return PairSource(None if pair.name == "custom" else pair.name, text(pair.clean), text(pair.corrupt),
                      vocab.label(pair.answer), vocab.label(pair.wrong), target=text(list(pair.target[1:])))


def patch_site(handle: ModelInHand, pair: PatchPair, site: str, method: str,
               progress: Progress | None = None, cancelled: Cancelled | None = None) -> PatchResult:
    """``site``'s ``PatchResult`` by exact patching (batched, cancellable) or attribution, as
    ``tfx-lab patch`` patches it (``core/verbs/patch.py``)."""
    from tui_lab.core.verbs.patch import Request, grids
    from tui_lab.core.verbs.verb import never

    def cells(done: int, total: int, _what: str) -> None:
        if progress is not None:
            progress(done, total)

    return grids(Request(site=site, method=method), handle, pair, cells, cancelled or never).grids[0]


def logit_attribution(handle: ModelInHand, pair: PatchPair) -> DlaResult:
    """Direct logit attribution of the clean input's answer over the wrong one (``tfx-lab dla``'s)."""
    from tui_lab.core.verbs.dla import attribute

    return attribute(handle, pair, pair.answer, pair.wrong)


def atlas_heads(handle: ModelInHand) -> list[HeadScore]:
    """The atlas's ``HeadScore``s of the model (on the probe the core picks for its task)."""
    from tui_lab.ui.widgets.atlas_scores import atlas_heads as scored

    return scored(handle.model, handle.task, handle.config.model.arch)


def history_steps(run_dir: Path | None) -> list[int]:
    """The history snapshot steps of ``run_dir`` (none without a folder)."""
    if run_dir is None:
        return []
    from tui_lab.core.runs.snapshots import list_snapshots

    return list(list_snapshots(run_dir))


def patch_over_history(handle: ModelInHand, run_dir: Path, pair: PatchPair, site: str, method: str,
                       progress: Progress | None = None, cancelled: Cancelled | None = None) -> HistoryPatching:
    """``site`` patched at every snapshot of ``run_dir`` (``HistoryPatching``), on a copy of
    the handle's model (the handle keeps its own weights)."""
    from tui_lab.core.analysis.patching.patching_history import patch_history
    return patch_history(handle.private_copy(), run_dir, pair, site, method=method,
                         progress=progress, cancelled=cancelled)


def atlas_curves(run_dir: Path, cancelled: Cancelled | None = None) -> ScoreCurves:
    """The atlas's score curves over ``run_dir``'s history (``ScoreCurves``); stops after the
    snapshot where ``cancelled()`` says so."""
    from tui_lab.core.analysis.heads.head_curves import score_curves
    from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled

    def on_step(_step: int, _heads: list[HeadScore]) -> None:
        if cancelled is not None and cancelled():
            raise PatchingCancelled("patching cancelled")

    return score_curves(run_dir, on_step=on_step)
