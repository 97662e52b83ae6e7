"""The edges view's workers: the circuit verb over the pair (``core/verbs/circuit.py``), the
final circuit over the run's history, and the known-circuit check, each in a thread,
posting what it found as a message to the edges widget.

A new job cancels the one under way (one group); each reads its worker's ``is_cancelled``
between forward passes. A failure is one ``EdgesFailed`` line, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.panes.patch import patch_jobs as jobs
from tui_lab.ui.panes.patch.patch_jobs import PairSource
from tui_lab.ui.worker_progress import Post, ProgressReport, merged, worker_cancelled

if TYPE_CHECKING:
    from tui_lab.core.analysis.edges.edges_history import EdgesHistory
    from tui_lab.core.analysis.edges.known_circuit import KnownCircuit
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.core.verbs.circuit import Result

POST_EVERY_S = 0.1  # progress messages at most this often
NAMESPACE = "edges_panel"  # the widget's handlers: on_edges_panel_<message>



@dataclass
class EdgesProgress(Message, namespace=NAMESPACE):
    done: int
    total: int
    what: str


@dataclass
class EdgesScored(Message, namespace=NAMESPACE):
    """The circuit's result over the pair, on the model in hand (a private copy)."""

    handle: ModelInHand
    result: Result
    run_dir: Path | None


@dataclass
class EdgesHistoryReady(Message, namespace=NAMESPACE):
    history: EdgesHistory


@dataclass
class CheckDone(Message, namespace=NAMESPACE):
    check: KnownCircuit | None
    error: str | None


@dataclass
class EdgesFailed(Message, namespace=NAMESPACE):
    text: str


_cancelled = worker_cancelled


def reporter(post: Post) -> ProgressReport:
    """``progress(done, total, what)`` posting at most every POST_EVERY_S (and at the end)."""
    return merged(post, EdgesProgress, POST_EVERY_S)


def score(post: Post, run: ModelHandle, source: PairSource, run_dir: Path | None) -> None:
    """The pair's edges (EAP-IG, 5 steps) and their faithfulness, on a private copy; with no pair
    picked, the circuit verb's default (an induction run's induction-key)."""
    from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled
    from tui_lab.core.verbs.circuit import Request, edges_pair, run_on

    try:
        handle = jobs.private_handle(run)
        pair = edges_pair(jobs.request_of(source), handle)  # none picked: the edges' own default
        result = run_on(Request(), handle, pair, reporter(post), _cancelled)
    except PatchingCancelled:
        return
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(EdgesFailed(one_line(exc)))
        return
    if not _cancelled():
        post(EdgesScored(handle, result, run_dir if jobs.history_steps(run_dir) else None))


def over_history(post: Post, handle: ModelInHand, run_dir: Path, result: Result) -> None:
    """The final circuit's faithfulness at every snapshot of ``run_dir``: its smallest top k% that
    recovers 0.8 on the final weights (what explains the trained model), followed back."""
    from tui_lab.core.analysis.edges.edges_history import edges_history
    from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled

    progress = reporter(post)
    try:
        found = edges_history(handle, run_dir, result.pair, result.scores, result.faithful.smallest(),
                              progress=progress, cancelled=_cancelled)
    except PatchingCancelled:
        return
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(EdgesFailed(one_line(exc)))
        return
    if not _cancelled():
        post(EdgesHistoryReady(found))


def check(post: Post, handle: ModelInHand) -> None:
    """The known-circuit check on the model in hand (an induction run's): its edges scored over
    the induction-key pairs, whatever pair is on show."""
    from tui_lab.core.analysis.edges.known_circuit import known_circuit
    from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled

    try:
        found = known_circuit(handle, progress=reporter(post), cancelled=_cancelled)
    except PatchingCancelled:
        return
    except Exception as exc:  # noqa: BLE001 - shown under the list
        post(CheckDone(None, one_line(exc)))
        return
    if not _cancelled():
        post(CheckDone(found, None))
