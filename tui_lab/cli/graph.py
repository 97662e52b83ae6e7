"""`tfx-lab graph (--run DIR | --model SOURCE) --transcoders DIR --input TEXT [--json]
[--neuronpedia OUT.json] [--at-step N]`: an attribution graph over transcoders
(circuit-tracer's method); the JSON is circuit-tracer's graph file."""

from __future__ import annotations

import argparse

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_run_or_model,
    emit_json,
    load_target,
    target_name,
)


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("graph", help="attribution graph over transcoders (circuit-tracer's graph JSON)")
    add_run_or_model(s)
    s.add_argument("--transcoders", required=True, metavar="DIR",
                   help="a transcoder set (circuit-tracer's or SAELens's files; a folder of step_<N> sets per history step)")
    s.add_argument("--input", required=True, metavar="TEXT", help="the prompt whose next token is traced")
    s.add_argument("--max-feature-nodes", type=int, metavar="N", help="feature nodes at most (default: every active feature)")
    s.add_argument("--node-threshold", type=float, default=0.8, metavar="X", help="pruning: share of influence kept by nodes (0.8)")
    s.add_argument("--edge-threshold", type=float, default=0.98, metavar="X", help="pruning: share kept by edges (0.98)")
    s.add_argument("--neuronpedia", metavar="OUT.json", help="write the graph file Neuronpedia and circuit-tracer's server read")
    s.add_argument("--slug", help="the graph's name in its file (default: OUT's stem)")
    add_at_step(s)
    add_json(s, "print the graph file (circuit-tracer's JSON)")
    s.set_defaults(handler=graph)


def graph(args: argparse.Namespace) -> int:
    """Attribute, prune, score; print a summary or the graph file's JSON."""
    from tui_lab.core.verbs.graph import Request, run

    request = Request(args.input, args.transcoders, args.max_feature_nodes, args.node_threshold,
                      args.edge_threshold, args.neuronpedia, args.slug, args.at_step)
    result = run(request, load_target(args, "cpu", args.at_step))
    if args.json:
        emit_json(result.to_json())
        return 0
    g, pruned = result.graph, result.pruned
    kept = int(pruned.node_mask[: g.n_features].sum())
    print(f"{target_name(args)}: attribution graph of {len(g.tokens)} tokens ({g.n_layers} layers)")
    print(f"features: {len(g.activation_values)} active, {g.n_features} nodes, {kept} kept after pruning; "
          f"edges kept: {int(pruned.edge_mask.sum())}")
    print(f"replacement score {result.scores[0]:.3f}, completeness score {result.scores[1]:.3f}")
    for k, (label, prob) in enumerate(zip(g.logit_labels, g.logit_probabilities.tolist(), strict=True)):
        print(f"  logit {label!r} p={prob:.3f}" + ("" if k else "  <- traced"))
    _print_top_edges(g, pruned)
    if result.written is not None:
        print(f"graph file written: {result.written}")
    return 0


def _print_top_edges(g: object, pruned: object) -> None:
    """The strongest kept edges into the top logit, labelled."""
    from tui_lab.core.analysis.circuits.graph import AttributionGraph, PruneResult

    assert isinstance(g, AttributionGraph) and isinstance(pruned, PruneResult)
    row = g.adjacency[g.logit_start] * pruned.edge_mask[g.logit_start]
    order = row.abs().argsort(descending=True)[:8].tolist()
    print(f"strongest edges into {g.logit_labels[0]!r}:")
    for i in order:
        if float(row[i]) == 0.0:
            break
        node = g.node(i)
        where = f"L{node.layer} pos {node.pos}" if node.layer >= 0 else f"pos {node.pos}"
        print(f"  {float(row[i]):+9.3f}  {node.kind.value:<7} {where:<12} {node.label}")
