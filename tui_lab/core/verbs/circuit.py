"""The circuit's edges over a clean / corrupted pair: edge scores, faithfulness, path patching.

The pair is a ready-made one (``pair``) or four typed texts, as ``tfx-lab patch``
takes them. ``method``: ``eap``, ``eap-ig`` (``ig_steps`` points) or ``exact``
(one patched forward per edge). The result holds every edge's score, the top
``top`` edges, the faithfulness curve of the scores' top k% circuits with MIB's
CPR and CMD, and, when ``path`` names a head pair (``a0.h1->a1.h3<k>``), that
path's exact patch. ``tfx-lab circuit`` and the Patch pane's edges view run it here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.analysis.edges.component_graph import EdgeError
from tui_lab.core.analysis.edges.edge_attribution import METHODS
from tui_lab.core.checks import at_least
from tui_lab.core.verbs import patch
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress

if TYPE_CHECKING:
    from tui_lab.core.analysis.edges.edge_patching import PathPatch
    from tui_lab.core.analysis.edges.edge_scores import EdgeScores
    from tui_lab.core.analysis.edges.edges_history import EdgesHistory
    from tui_lab.core.analysis.edges.faithfulness import Faithfulness
    from tui_lab.core.analysis.edges.known_circuit import KnownCircuit
    from tui_lab.core.analysis.patching.patch_pair import PatchPair
    from tui_lab.core.opening.in_hand import ModelInHand

_PATH = re.compile(r"^a(\d+)\.h(\d+)->a(\d+)\.h(\d+)<([qkv])>$")


def parse_path(text: str) -> tuple[tuple[int, int], tuple[int, int], str]:
    """``a0.h1->a1.h3<k>`` as ((0, 1), (1, 3), "k"); EdgeError in one line otherwise."""
    found = _PATH.match(text.strip())
    if found is None:
        raise EdgeError(f"--path is a head pair and an input, like a0.h1->a1.h3<k>; got {text!r}")
    a, b, c, d = (int(found[i]) for i in range(1, 5))
    return (a, b), (c, d), found[5]


@dataclass(frozen=True)
class Request:
    """How edges are scored, how many are listed, and where the pair comes from."""

    method: str = "eap-ig"
    ig_steps: int = 5
    top: int = 20
    pair: str | None = None
    clean: str | None = None
    corrupt: str | None = None
    answer: str | None = None
    wrong: str | None = None
    path: str | None = None  # a head pair to path-patch: a0.h1->a1.h3<k>
    mean: int = 0  # > 0: outside the circuit, the writers' mean over this many held-out inputs
    check: bool = False  # an induction run's known-circuit check (``known_circuit``) as well
    history: bool = False  # the final circuit's faithfulness at every history snapshot as well

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise EdgeError(f"unknown method {self.method!r}: eap, eap-ig or exact")
        at_least("--top", self.top, 1)
        at_least("--ig-steps", self.ig_steps, 1)
        at_least("--mean", self.mean, 0)
        if self.path is not None:
            parse_path(self.path)
        self.patch_request()  # the pair's own refusals (both kinds given, one missing)

    def patch_request(self) -> patch.Request:
        """The pair's fields as the patch verb takes them (it owns making the pair)."""
        return patch.Request(pair=self.pair, clean=self.clean, corrupt=self.corrupt, answer=self.answer,
                             wrong=self.wrong)


@dataclass(frozen=True)
class Result:
    """The pair, every edge's scores, the listed top edges, faithfulness, and a path's patch."""

    pair: PatchPair
    scores: EdgeScores
    top: int
    faithful: Faithfulness
    path: PathPatch | None = None
    mean: int = 0
    check: KnownCircuit | None = None
    history: EdgesHistory | None = None

    def to_json(self) -> JSON:
        out: JSON = {
            "pair": self.pair.name, "method": self.scores.method, "clean": self.scores.clean,
            "corrupt": self.scores.corrupt, "n_edges": self.scores.graph.n_edges,
            "edges": [e.to_dict() for e in self.scores.top(self.top)],
            "faithfulness": self.faithful.points(), "cpr": self.faithful.cpr, "cmd": self.faithful.cmd,
            "ablation": "corrupt" if self.mean == 0 else f"mean of {self.mean} held-out inputs",
        }
        if self.path is not None:
            out["path"] = self.path.to_dict()
        if self.check is not None:
            out["known_circuit"] = self.check.to_dict()
        if self.history is not None:
            out["history"] = self.history.to_dict()
        return out


def default_pair(model: ModelInHand) -> str | None:
    """The ready pair edges are scored over when none is named: an induction run's induction-key
    (it asks where the heads look, which the edges between heads carry; the plain induction pair
    asks what they copy), else the model's first (None)."""
    from tui_lab.core.analysis.patching.patch_pair import ready_pairs

    return "induction-key" if "induction-key" in ready_pairs(model) else None


def run(request: Request, model: ModelInHand, progress: Progress = no_progress,
        cancelled: Cancelled = never) -> Result:
    """Score every edge over the request's pair (``default_pair`` when none is named or typed),
    then measure the top circuits' faithfulness."""
    return run_on(request, model, edges_pair(request.patch_request(), model), progress, cancelled)


def edges_pair(asked: patch.Request, model: ModelInHand) -> PatchPair:
    """The pair ``asked`` names or types, as ``tfx-lab patch`` makes it; neither: ``default_pair``."""
    if asked.pair is None and not asked.typed():
        asked = dataclasses.replace(asked, pair=default_pair(model))
    return patch.pair_of(asked, model)


def run_on(request: Request, model: ModelInHand, pair: PatchPair, progress: Progress = no_progress,
           cancelled: Cancelled = never) -> Result:
    """The request over ``pair`` (a pair already made: the Patch pane keeps its own)."""
    from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
    from tui_lab.core.analysis.edges.edge_forward import decoder_of, graph_of
    from tui_lab.core.analysis.edges.edge_patching import path_patch
    from tui_lab.core.analysis.edges.edges_history import edges_history
    from tui_lab.core.analysis.edges.faithfulness import faithfulness
    from tui_lab.core.analysis.edges.known_circuit import known_circuit

    graph = graph_of(decoder_of(model.model))  # refuses other shapes before any work
    where = parse_path(request.path) if request.path is not None else None
    if where is not None:
        graph.check_head(*where[0])
        graph.check_head(*where[1])
    scores = edge_attribution(model, pair, request.method, request.ig_steps, progress, cancelled)
    held = held_out(model, pair, request.mean) if request.mean else None
    progress(0, 1, "faithfulness")
    faithful = faithfulness(model, pair, scores, mean_over=held)
    progress(1, 1, "faithfulness")
    found = None if where is None else path_patch(model, pair, *where)
    check = known_circuit(model, progress=progress, cancelled=cancelled) if request.check else None
    history = None
    if request.history:
        if model.run_dir is None:
            raise EdgeError("--history: the model was not opened from a run folder")
        history = edges_history(model, model.run_dir, pair, scores, faithful.smallest(), progress=progress,
                                cancelled=cancelled)
    return Result(pair, scores, request.top, faithful, found, request.mean, check, history)


def held_out(model: ModelInHand, pair: PatchPair, n: int) -> list[list[int]]:
    """``n`` held-out inputs of the pair's length for a mean ablation: the clean inputs of the
    induction pairs (plain or key) of seeds 1..n (other blocks, the same shape); EdgeError for
    other pairs."""
    from tui_lab.core.analysis.patching.patch_pair import induction_key_pair, induction_pair

    make = {"induction": induction_pair, "induction-key": induction_key_pair}.get(pair.name)
    if make is None:
        raise EdgeError("--mean takes its held-out inputs from the induction pairs' other seeds: "
                        "use --pair induction or induction-key (other pairs: the corrupted run, the default)")
    return [make(model, seed=seed).clean for seed in range(1, n + 1)]
