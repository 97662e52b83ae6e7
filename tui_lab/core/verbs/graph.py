"""An attribution graph of one prompt over a transcoder set (circuit-tracer's method), pruned,
scored and, on request, written as circuit-tracer's graph file (the JSON Neuronpedia reads).

``tfx-lab graph`` runs it here; the Circuit pane's worker calls the same ``run``. Everything
is checked before any model work and nothing is written on a refusal: a prompt past the
context, a transcoder set for another model (width, layer count), a truncated layer
file, hooks the model lacks, a family the replacement cannot bracket.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.checks import in_range, positive
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, check_text, never, no_progress

if TYPE_CHECKING:
    from tui_lab.core.analysis.circuits.edge_heads import EdgeCarriers
    from tui_lab.core.analysis.circuits.graph import AttributionGraph, PruneResult
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.transcoder import TranscoderSet


@dataclass(frozen=True)
class Request:
    """The prompt, the transcoder folder, the feature cap, the pruning thresholds, where
    to write the graph file (None: nowhere), the history step of the set, and whether to
    find the heads carrying the top logit's strongest edge from an earlier position (kept
    by pruning when one is)."""

    input: str
    transcoders: str
    max_feature_nodes: int | None = None
    node_threshold: float = 0.8
    edge_threshold: float = 0.98
    neuronpedia: str | None = None
    slug: str | None = None
    at_step: int | None = None
    carriers: bool = False

    def __post_init__(self) -> None:
        if not self.input:
            raise LabError("empty input: give some text")
        if self.max_feature_nodes is not None:
            positive("--max-feature-nodes", self.max_feature_nodes)
        in_range("--node-threshold", self.node_threshold, 0.0, 1.0)
        in_range("--edge-threshold", self.edge_threshold, 0.0, 1.0)
        if self.neuronpedia is not None and Path(self.neuronpedia).is_dir():
            raise LabError(f"--neuronpedia {self.neuronpedia}: a folder; give a file name such as graph.json")


@dataclass
class Result:
    """The graph, its pruning, its (replacement, completeness) scores, the file written, and
    (when asked) the heads carrying the top logit's strongest kept earlier-position edge."""

    graph: AttributionGraph
    pruned: PruneResult
    scores: tuple[float, float]
    transcoders: TranscoderSet
    slug: str
    written: Path | None = None
    notes: list[str] = field(default_factory=list)
    carriers: EdgeCarriers | None = None

    def to_json(self) -> JSON:
        """circuit-tracer's graph file; its metadata also carries the scores, the model and step."""
        from tui_lab.core.analysis.circuits.graph_file import graph_json

        data = graph_json(self.graph, self.slug, pruned=self.pruned)
        meta = data["metadata"]
        assert isinstance(meta, dict)
        meta.update({
            "replacement_score": self.scores[0], "completeness_score": self.scores[1],
            "model": self.graph.model_name, "step": self.graph.step, "n_features_active": len(self.graph.activation_values),
            "n_features_selected": self.graph.n_features,
        })
        return data


def open_set(request: Request, model: ModelInHand) -> TranscoderSet:
    """The request's transcoder set for ``model`` (a history folder's set at the request's
    step, else the model's own step when the folder has one), checked to fit it."""
    from tui_lab.core.analysis.circuits.graph_history import history_steps, set_folder
    from tui_lab.core.analysis.circuits.replacement_model import check_replaceable
    from tui_lab.core.sae.transcoder import open_transcoders

    folder = Path(request.transcoders).expanduser()
    if not folder.exists():
        raise LabError(f"--transcoders {request.transcoders}: no such folder")
    step = request.at_step
    if step is None and model.step in history_steps(folder):
        step = model.step
    tset = open_transcoders(set_folder(folder, step), model)
    check_replaceable(model, tset)
    return tset


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Attribute, label, prune, score; write the graph file last (atomically) when asked."""
    from tui_lab.core.analysis.circuits.attribution import attribute
    from tui_lab.core.analysis.circuits.feature_labels import label_features
    from tui_lab.core.analysis.circuits.graph_file import write_graph_file

    check_text(model, request.input, "the input")
    tset = open_set(request, model)
    graph = attribute(model, request.input, tset, max_feature_nodes=request.max_feature_nodes,
                      progress=progress, cancelled=cancelled)
    pruned = graph.prune(request.node_threshold, request.edge_threshold)
    label_features(graph, model, tset, pruned.node_mask.nonzero().flatten().tolist())
    slug = request.slug or (Path(request.neuronpedia).stem if request.neuronpedia else "tfx-lab-graph")
    result = Result(graph, pruned, graph.scores(), tset, slug)
    if request.carriers:
        from tui_lab.core.analysis.circuits.edge_heads import earlier_sources, edge_carriers

        found = earlier_sources(graph, graph.logit_start, pruned) or earlier_sources(graph, graph.logit_start)
        if found:
            result.carriers = edge_carriers(model, graph, tset, graph.logit_start, found[0])
    if request.neuronpedia is not None:
        result.written = write_graph_file(result.to_json(), Path(request.neuronpedia).expanduser())
    return result
