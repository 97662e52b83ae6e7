"""The Patch pane's workers: each runs ``patch_jobs`` (the verbs ``patch`` and ``dla``, the
atlas, patching over the history) in a thread and posts what it found as a message here.

The pane starts them with ``run_worker(..., thread=True)`` in one group, so a new job
cancels the one under way; each reads its worker's ``is_cancelled`` between forward
passes. A failure is one ``Failed`` line, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.panes.patch import patch_jobs as jobs
from tui_lab.ui.panes.patch.patch_jobs import PairSource
from tui_lab.ui.panes.patch.patch_view import Atlas, atlas_of
from tui_lab.ui.worker_progress import Post, merged, worker_cancelled

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.head_curves import ScoreCurves
    from tui_lab.core.analysis.lenses.direct_logit_attribution import DlaResult
    from tui_lab.core.analysis.patching.activation_patching import PatchResult
    from tui_lab.core.analysis.patching.patch_pair import PatchPair
    from tui_lab.core.analysis.patching.patching_history import HistoryPatching
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand

POST_EVERY_S = 0.1  # progress messages at most this often
NAMESPACE = "patch_pane"  # the pane's handlers: on_patch_pane_<message>



@dataclass
class Progress(Message, namespace=NAMESPACE):
    """``done`` of ``total`` (merged: at most one per POST_EVERY_S)."""

    done: int
    total: int
    what: str


@dataclass
class Patched(Message, namespace=NAMESPACE):
    """A site's grid of the model in hand, its pair and (when worked out) the atlas and DLA."""

    handle: ModelInHand
    pair: PatchPair
    texts: PairSource
    result: PatchResult
    atlas: Atlas | None
    dla: DlaResult | None
    dla_error: str | None


@dataclass
class HistoryReady(Message, namespace=NAMESPACE):
    """The grid at every history snapshot, the atlas's curves; then ``move``."""

    history: HistoryPatching
    curves: ScoreCurves
    run_dir: Path
    move: str | None


@dataclass
class Failed(Message, namespace=NAMESPACE):
    text: str


_cancelled = worker_cancelled


def reporter(post: Post, what: str) -> jobs.Progress:
    """``progress(done, total)`` posting ``Progress`` at most every POST_EVERY_S (and at the end)."""
    report = merged(post, Progress, POST_EVERY_S)
    return lambda done, total: report(done, total, what)


def patch(post: Post, run: ModelHandle, source: PairSource, site: str, method: str, score_atlas: bool) -> None:
    """The pair, the site's grid, the DLA and (when asked) the atlas, on a private copy."""
    from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled

    try:
        handle = jobs.private_handle(run)
        pair = jobs.make_pair(handle, source)
        result = jobs.patch_site(handle, pair, site, method, reporter(post, "patching"), _cancelled)
        dla, dla_error = None, None
        try:
            dla = jobs.logit_attribution(handle, pair)
        except Exception as exc:  # noqa: BLE001 - shown in the DLA view
            dla_error = one_line(exc)
        atlas = None
        if score_atlas and not _cancelled():
            post(Progress(0, 1, "the atlas's labels"))
            atlas = atlas_of(jobs.atlas_heads(handle))
    except PatchingCancelled:
        return
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    if not _cancelled():
        post(Patched(handle, pair, jobs.pair_texts(handle, pair), result, atlas, dla, dla_error))


def history(post: Post, handle: ModelInHand, run_dir: Path, pair: PatchPair, site: str, method: str,
            curves: ScoreCurves | None, move: str | None) -> None:
    """The grid at every snapshot; the atlas's curves when the lab has none yet."""
    from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled

    try:
        found = jobs.patch_over_history(handle, run_dir, pair, site, method, reporter(post, "snapshots"),
                                        _cancelled)
        if curves is None:
            post(Progress(0, 1, "the atlas over the snapshots"))
            curves = jobs.atlas_curves(run_dir, _cancelled)
    except PatchingCancelled:
        return
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    if not _cancelled():
        post(HistoryReady(found, curves, run_dir, move))
