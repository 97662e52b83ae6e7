"""The Circuit pane's workers: the ``graph`` verb (attribute, label, prune, score) on the model
in hand or a history snapshot, an intervention in the real model, and the heads carrying an
edge with the top head's QK tracing; each runs in a thread and posts what it found as a
message here.

The pane starts them in one exclusive group, so a new job cancels the one under way; the
attribution reads the worker's ``is_cancelled`` between batches. A failure is one
``Failed`` line, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.worker_progress import Post, ProgressReport, merged, worker_cancelled

if TYPE_CHECKING:
    from tui_lab.core.analysis.circuits.edge_heads import EdgeCarriers
    from tui_lab.core.analysis.circuits.graph import AttributionGraph, PruneResult
    from tui_lab.core.analysis.circuits.intervention import LogitCheck
    from tui_lab.core.analysis.circuits.qk_tracing import QKTracing
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.sae.transcoder import TranscoderSet

POST_EVERY_S = 0.1  # progress messages at most this often
NAMESPACE = "circuit_pane"  # the pane's handlers: on_circuit_pane_<message>
MAX_FEATURE_NODES = 400  # the pane's cap: a graph a terminal can show, traced in seconds



@dataclass
class Progress(Message, namespace=NAMESPACE):
    """``done`` of ``total`` rows (merged: at most one per POST_EVERY_S)."""

    done: int
    total: int
    what: str


@dataclass
class GraphReady(Message, namespace=NAMESPACE):
    """A graph, its pruning and scores, the set and the model it was traced on, its step."""

    graph: AttributionGraph
    pruned: PruneResult
    scores: tuple[float, float]
    transcoders: TranscoderSet
    model: ModelInHand
    step_index: int | None


@dataclass
class Checked(Message, namespace=NAMESPACE):
    """An intervention's logit changes, real and predicted, for ``nodes`` scaled by ``scale``."""

    checks: list[LogitCheck]
    nodes: list[int]
    scale: float


@dataclass
class Carried(Message, namespace=NAMESPACE):
    """The heads carrying an edge and the top head's QK tracing (None: no head carries it)."""

    carriers: EdgeCarriers
    qk: QKTracing | None


@dataclass
class Failed(Message, namespace=NAMESPACE):
    text: str


_cancelled = worker_cancelled


def reporter(post: Post) -> ProgressReport:
    """``progress(done, total, what)`` posting ``Progress`` at most every POST_EVERY_S."""
    return merged(post, Progress, POST_EVERY_S)


def trace(post: Post, run: ModelHandle, run_dir: Path | None, text: str, folder: str,
          step: int | None, step_index: int | None) -> None:
    """The graph of ``text`` on the model in hand (``step`` None) or the run at ``step``."""
    from tui_lab.core.analysis.circuits.attribution import AttributionStopped
    from tui_lab.core.verbs.graph import Request
    from tui_lab.core.verbs.graph import run as graph_run

    try:
        if step is None:
            from tui_lab.ui.state.model_copies import private_in_hand

            model = private_in_hand(run)  # a run in training keeps changing its own
        else:
            from tui_lab.core.opening.model_in_hand import open_model

            assert run_dir is not None
            model = open_model(run_dir, at_step=step)
        request = Request(text, folder, max_feature_nodes=MAX_FEATURE_NODES, at_step=step)
        result = graph_run(request, model, reporter(post), _cancelled)
    except AttributionStopped:
        return
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    if not _cancelled():
        post(GraphReady(result.graph, result.pruned, result.scores, result.transcoders, model, step_index))


def check(post: Post, model: ModelInHand, graph: AttributionGraph, transcoders: TranscoderSet,
          nodes: list[int], scale: float) -> None:
    """The real model with ``nodes`` scaled by ``scale``, beside the graph's prediction."""
    from tui_lab.core.analysis.circuits.intervention import intervene

    try:
        checks = intervene(model, graph, transcoders, nodes, scale)
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    post(Checked(checks, nodes, scale))


def carry(post: Post, model: ModelInHand, graph: AttributionGraph, transcoders: TranscoderSet,
          target: int, source: int) -> None:
    """The heads carrying edge ``source -> target`` (progress by head), then the top head's
    QK tracing at its query and the key it read the edge from."""
    from tui_lab.core.analysis.circuits.attribution import AttributionStopped
    from tui_lab.core.analysis.circuits.edge_heads import edge_carriers
    from tui_lab.core.analysis.circuits.qk_tracing import qk_trace

    try:
        found = edge_carriers(model, graph, transcoders, target, source, reporter(post), _cancelled)
        top = found.carriers[0] if found.carriers else None
        traced = None if top is None else qk_trace(model, graph.tokens, transcoders, top.layer, top.head,
                                                    top.query, top.key)
    except AttributionStopped:
        return
    except Exception as exc:  # noqa: BLE001 - one line, the lab goes on
        post(Failed(one_line(exc)))
        return
    if not _cancelled():
        post(Carried(found, traced))
