"""`tfx-lab graph (--run DIR | --model SOURCE) --transcoders DIR --input TEXT [--json]
[--neuronpedia OUT.json] [--at-step N]`: an attribution graph over transcoders
(circuit-tracer's method); the JSON is circuit-tracer's graph file. The summary names the
heads that carry the top logit's strongest edge from an earlier position.

`... --qk LAYER.HEAD [--query-pos Q] [--key-pos K] [--top N] [--hops N] [--json]`: QK tracing of that
head instead: its score at (Q, K) split into pairs of named residual-stream parts, the top
pairs and both sides' marginals (JSON keys ``pair_wise_contributors``,
``top_q_marginal_contributors``, ``top_k_marginal_contributors``, ``score``, ``constant``)."""

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
    s.add_argument("--qk", metavar="LAYER.HEAD", help="QK-trace this head instead of drawing the graph (e.g. 1.2)")
    s.add_argument("--query-pos", type=int, metavar="Q", help="--qk: the query position (default: the last)")
    s.add_argument("--key-pos", type=int, metavar="K", help="--qk: the key position (default: where the head attends most)")
    s.add_argument("--top", type=int, default=10, metavar="N", help="--qk: pairs and parts listed (10)")
    s.add_argument("--hops", type=int, default=1, metavar="N",
                   help="--qk: how many moves back earlier heads' outputs are traced (1; 0 leaves them whole)")
    add_at_step(s)
    add_json(s, "print the graph file (circuit-tracer's JSON); with --qk, the QK tracing")
    s.set_defaults(handler=graph)


def graph(args: argparse.Namespace) -> int:
    """Attribute, prune, score; print a summary or the graph file's JSON (or QK-trace a head)."""
    from tui_lab.core.verbs.graph import Request, run

    if args.qk is not None:
        return qk(args)
    request = Request(args.input, args.transcoders, args.max_feature_nodes, args.node_threshold,
                      args.edge_threshold, args.neuronpedia, args.slug, args.at_step, carriers=not args.json)
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
    _print_carriers(g, result.carriers)
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


def _print_carriers(g: object, carriers: object) -> None:
    """The heads carrying the top logit's strongest earlier-position edge."""
    from tui_lab.core.analysis.circuits.edge_heads import EdgeCarriers
    from tui_lab.core.analysis.circuits.graph import AttributionGraph

    assert isinstance(g, AttributionGraph)
    if not isinstance(carriers, EdgeCarriers) or not carriers.carriers:
        return
    source = g.node(carriers.source)
    print(f"carried by (edge {source.kind.value} {source.label!r} pos {source.pos} -> {g.logit_labels[0]!r}, "
          f"{carriers.edge:+.3f}):")
    for c in carriers.carriers[:4]:
        print(f"  {c.name}  {c.share:+9.3f}  attending {c.query}->{c.key}  (tfx-lab graph ... --qk {c.layer}.{c.head} "
              f"--query-pos {c.query} --key-pos {c.key})")


def qk(args: argparse.Namespace) -> int:
    """QK-trace one head: the score, the top pairs, both marginals."""
    from tui_lab.core.errors import LabError
    from tui_lab.core.verbs.graph_qk import Request, run

    if args.neuronpedia is not None:
        raise LabError("--qk traces a head; it writes no graph file (drop --neuronpedia)")
    request = Request(args.input, args.transcoders, args.qk, args.query_pos, args.key_pos, args.top, args.at_step,
                      args.hops)
    result = run(request, load_target(args, "cpu", args.at_step))
    if args.json:
        emit_json(result.to_json())
        return 0
    t = result.tracing
    print(f"{target_name(args)}: L{t.layer}.H{t.head} at query {t.query}, key {t.key}: score {t.score:+.4f} "
          f"(terms sum {t.total:+.4f}, constants {t.constant:+.4f}), pattern weight {t.weight:.3f}")
    print("top pairs (query part x key part):")
    for q, k, v in t.top_pairs(args.top):
        print(f"  {v:+9.3f}  {q.label:<28} x {k.label}")
    for side, parts in (("query", t.top_q(args.top)), ("key", t.top_k(args.top))):
        print(f"{side} side (each part's total):")
        for part, value in parts:
            print(f"  {value:+9.3f}  {part.label}")
    return 0
