"""An attribution graph as circuit-tracer's graph file: the JSON its local server and
Neuronpedia read (``circuit_tracer/utils/create_graph_files.py`` and
``frontend/graph_models.py``, schema version 1).

The graph is pruned first (the same thresholds), and only kept nodes with a kept
edge (and every token and logit) are written. Node ids are theirs: a feature
``{layer}_{feature}_{pos}``, an error ``0_{layer}_{pos}``, a token
``E_{token id}_{pos}``, a logit ``{n_layers + 1}_{token id}_{last pos}``; a feature's
``feature`` is the Cantor pairing of (layer, feature).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from torch import Tensor

from tui_lab.core.analysis.circuits.graph import AttributionGraph, NodeKind, PruneResult

JSON = dict[str, object]


def cantor(x: int, y: int) -> int:
    """The Cantor pairing of two non-negative integers (circuit-tracer's feature number)."""
    return (x + y) * (x + y + 1) // 2 + y


def _node(graph: AttributionGraph, index: int, cumulative: Tensor) -> JSON:
    node = graph.node(index)
    base: JSON = {"token_prob": 0.0, "is_target_logit": False, "run_idx": 0, "reverse_ctx_idx": 0}
    influence = float(cumulative[index])
    if node.kind is NodeKind.FEATURE:
        return {"node_id": f"{node.layer}_{node.id}_{node.pos}", "feature": cantor(node.layer, node.id),
                "layer": str(node.layer), "ctx_idx": node.pos, "feature_type": "cross layer transcoder",
                **base, "jsNodeId": f"{node.layer}_{node.id}-0", "clerp": "", "influence": influence,
                "activation": node.activation}
    if node.kind is NodeKind.ERROR:
        return {"node_id": f"0_{node.layer}_{node.pos}", "feature": -1, "layer": str(node.layer),
                "ctx_idx": node.pos, "feature_type": "mlp reconstruction error", **base,
                "jsNodeId": f"{node.layer}_{node.pos}-0", "clerp": "", "influence": influence, "activation": None}
    if node.kind is NodeKind.TOKEN:
        return {"node_id": f"E_{node.id}_{node.pos}", "feature": node.pos, "layer": "E", "ctx_idx": node.pos,
                "feature_type": "embedding", **base, "jsNodeId": f"E_{node.id}-{node.pos}", "clerp": "",
                "influence": influence, "activation": None}
    layer, k = str(graph.n_layers + 1), index - graph.logit_start
    prob = float(graph.logit_probabilities[k])
    return {"node_id": f"{layer}_{node.id}_{node.pos}", "feature": node.id, "layer": layer, "ctx_idx": node.pos,
            "feature_type": "logit", **base, "token_prob": prob, "is_target_logit": k == 0,
            "jsNodeId": f"L_{node.id}-{node.pos}", "clerp": f'Output "{node.label}" (p={prob:.3f})',
            "influence": None, "activation": None}


def graph_json(
    graph: AttributionGraph, slug: str, node_threshold: float = 0.8, edge_threshold: float = 0.98,
    pruned: PruneResult | None = None,
) -> JSON:
    """The graph file's contents: ``metadata``, ``qParams``, ``nodes``, ``links``."""
    pruned = pruned or graph.prune(node_threshold, edge_threshold)
    kept = pruned.node_mask.nonzero().flatten().tolist()
    nodes = {i: _node(graph, i, pruned.cumulative_scores) for i in kept}
    dsts, srcs = pruned.edge_mask.nonzero(as_tuple=True)
    weights = graph.adjacency[dsts, srcs].tolist()
    links = [
        {"source": nodes[s]["node_id"], "target": nodes[d]["node_id"], "weight": w}
        for s, d, w in zip(srcs.tolist(), dsts.tolist(), weights, strict=True) if s in nodes and d in nodes
    ]
    connected = {link["source"] for link in links} | {link["target"] for link in links}
    used = [n for n in nodes.values() if n["node_id"] in connected or n["feature_type"] in ("embedding", "logit")]
    metadata: JSON = {
        "slug": slug, "scan": graph.scan, "transcoder_list": [], "prompt_tokens": list(graph.token_texts or graph.token_labels),
        "prompt": graph.text, "node_threshold": node_threshold, "schema_version": 1,
    }
    q_params: JSON = {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""}
    return {"metadata": metadata, "qParams": q_params, "nodes": used, "links": links}


def write_graph_file(data: JSON, path: Path) -> Path:
    """Write the graph file to ``path`` atomically (a temporary file in its folder, then
    moved into place); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's file is private; the graph file is not
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
