"""QK tracing of one head on a prompt over a transcoder set: ``tfx-lab graph ... --qk L.H``.

The attribution graph freezes attention; this opens one head's score at (query, key):
the score split into a term per pair of named parts of the two residual streams
(``core/analysis/circuits/qk_tracing.py``), the top pairs and both sides' marginals.
Checked before any model work (one line each, nothing written): a head not written
``L.H``, negative positions, a key after the query; then the transcoder set against the
model, and the head and positions against the prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.checks import positive
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import (
    JSON,
    Cancelled,
    Progress,
    check_text,
    never,
    no_progress,
    stop_if,
)

if TYPE_CHECKING:
    from tui_lab.core.analysis.circuits.qk_components import Part
    from tui_lab.core.analysis.circuits.qk_tracing import QKTracing
    from tui_lab.core.opening.in_hand import ModelInHand

HEAD = re.compile(r"^L?(\d+)\.H?(\d+)$")


def parse_head(text: str) -> tuple[int, int]:
    """``1.2`` or ``L1.H2`` -> (1, 2); anything else refused in one line."""
    found = HEAD.match(text.strip())
    if found is None:
        raise LabError(f"--qk {text!r}: give a head as LAYER.HEAD, e.g. 1.2 (or L1.H2)")
    return int(found.group(1)), int(found.group(2))


@dataclass(frozen=True)
class Request:
    """The prompt, the transcoder folder, the head ``L.H``, the query position (None: the
    last), the key position (None: where the head attends most), how many pairs and parts
    to list, the history step of the set, how many moves back earlier heads are traced."""

    input: str
    transcoders: str
    head: str
    query_pos: int | None = None
    key_pos: int | None = None
    top: int = 10
    at_step: int | None = None
    hops: int = 1

    def __post_init__(self) -> None:
        if not self.input:
            raise LabError("empty input: give some text")
        parse_head(self.head)
        positive("--top", self.top)
        if self.hops < 0:
            raise LabError(f"--hops {self.hops}: at least 0 (0 leaves earlier heads' outputs whole)")
        for name, pos in (("--query-pos", self.query_pos), ("--key-pos", self.key_pos)):
            if pos is not None and pos < 0:
                raise LabError(f"{name} {pos}: positions count from 0")
        if self.query_pos is not None and self.key_pos is not None and self.key_pos > self.query_pos:
            raise LabError(f"--key-pos {self.key_pos} comes after --query-pos {self.query_pos}: "
                           "causal attention never looks ahead")


def _part(part: Part, value: float) -> JSON:
    return {"node": part.node_id, "label": part.label, "kind": part.kind, "score": value}


@dataclass
class Result:
    """The head's tracing and how many entries to list."""

    tracing: QKTracing
    top: int

    def to_json(self) -> JSON:
        """The score, its constant, the top pairs and both marginals (circuit-tracer's
        ``QKTracingResults`` keys), each entry with a node id, label and kind."""
        t = self.tracing
        return {
            "layer": t.layer, "head": t.head, "query_pos": t.query, "key_pos": t.key,
            "score": t.score, "total": t.total, "constant": t.constant, "pattern_weight": t.weight,
            "pair_wise_contributors": [
                {"q_node": q.node_id, "k_node": k.node_id, "q_label": q.label, "k_label": k.label, "score": v}
                for q, k, v in t.top_pairs(self.top)
            ],
            "top_q_marginal_contributors": [_part(p, v) for p, v in t.top_q(self.top)],
            "top_k_marginal_contributors": [_part(p, v) for p, v in t.top_k(self.top)],
        }


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Open the set (checked to fit the model), trace the head at (query, key)."""
    from tui_lab.core.analysis.circuits.qk_tracing import qk_trace
    from tui_lab.core.verbs.graph import Request as GraphRequest
    from tui_lab.core.verbs.graph import open_set

    check_text(model, request.input, "the input")
    tset = open_set(GraphRequest(request.input, request.transcoders, at_step=request.at_step), model)
    stop_if(cancelled)
    progress(0, 1, "qk")
    layer, head = parse_head(request.head)
    tracing = qk_trace(model, request.input, tset, layer, head, request.query_pos, request.key_pos, request.hops)
    progress(1, 1, "qk")
    return Result(tracing, request.top)
