"""What the Circuit pane shows, Textual-free: the pruned graph laid out by layer (rows, logits
on top, tokens at the bottom) and position (columns), the cursor on one node, the marked
features, the selected node's strongest edges, an intervention's check, the history steps,
and the heads carrying an edge between positions with the top head's QK tracing.

The pane keeps one ``CircuitView``; its keys move it, its workers fill it in. Drawing
returns lines of (text, style) segments, which the pane turns into rich text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_lab.core.analysis.circuits.edge_heads import EdgeCarriers
    from tui_lab.core.analysis.circuits.graph import AttributionGraph, Node, PruneResult
    from tui_lab.core.analysis.circuits.intervention import LogitCheck
    from tui_lab.core.analysis.circuits.qk_tracing import QKTracing

Segment = tuple[str, str]  # (text, rich style)
Line = list[Segment]
CELL_NODES = 3  # nodes drawn per cell; more are counted ("+2")
LABEL_WIDTH = 6


@dataclass
class CircuitView:
    """The graph on show and where the user stands in it."""

    graph: AttributionGraph | None = None
    pruned: PruneResult | None = None
    cursor: int | None = None  # a node index of the adjacency
    marked: set[int] = field(default_factory=set)
    checks: list[LogitCheck] | None = None
    checked: list[int] = field(default_factory=list)  # the nodes the checks switched off
    scale: float = 0.0
    steps: list[int] = field(default_factory=list)  # history steps with transcoders
    step_index: int | None = None  # None: the model in hand
    scores: tuple[float, float] = (0.0, 0.0)  # replacement, completeness
    carriers: EdgeCarriers | None = None  # the heads carrying the last edge asked about (a)
    qk: QKTracing | None = None  # the top carrier's QK tracing

    def show(self, graph: AttributionGraph, pruned: PruneResult, scores: tuple[float, float]) -> None:
        """A new graph: the cursor on the top logit, marks, checks and QK tracing cleared."""
        self.graph, self.pruned, self.scores = graph, pruned, scores
        self.marked, self.checks, self.checked = set(), None, []
        self.carriers, self.qk = None, None
        self.cursor = graph.logit_start

    def edge_between_positions(self) -> tuple[int, int] | None:
        """(target, source) of the cursor's strongest edge between positions: a feature or
        logit's strongest kept incoming edge from an earlier position (any edge when none is
        kept), else the node's strongest kept outgoing edge to a later position."""
        from tui_lab.core.analysis.circuits.edge_heads import earlier_sources

        g, p, node = self.graph, self.pruned, self.node()
        if g is None or p is None or node is None:
            return None
        if node.kind.value in ("feature", "logit"):
            found = earlier_sources(g, node.index, p) or earlier_sources(g, node.index)
            if found:
                return node.index, found[0]
        kept = p.edge_mask[:, node.index] & p.node_mask
        later = [t for t in kept.nonzero().flatten().tolist() if g.node(t).pos > node.pos]
        if not later:
            return None
        return max(later, key=lambda t: abs(float(g.adjacency[t, node.index]))), node.index

    def rows(self) -> list[tuple[str, list[list[int]]]]:
        """(row label, each position's kept nodes, most influential first), logits first."""
        g, p = self.graph, self.pruned
        if g is None or p is None:
            return []
        kept = p.node_mask.nonzero().flatten().tolist()
        cumulative = p.cumulative_scores
        grid: dict[int, list[list[int]]] = {r: [[] for _ in range(g.n_pos)] for r in range(-1, g.n_layers + 1)}
        for index in sorted(kept, key=lambda i: float(cumulative[i])):
            node = g.node(index)
            grid[node.layer][node.pos].append(index)
        labels = {g.n_layers: "logit", -1: "tok"}
        return [(labels.get(r, f"L{r}"), grid[r]) for r in range(g.n_layers, -2, -1)]

    def _flat(self) -> list[list[int]]:
        return [[i for cell in cells for i in cell] for _, cells in self.rows()]

    def move(self, d_row: int, d_col: int) -> None:
        """Arrows: along the row (left/right) or to the nearest node of the next row with any."""
        if self.graph is None or self.cursor is None:
            return
        flat = self._flat()
        row = next((r for r, nodes in enumerate(flat) if self.cursor in nodes), 0)
        if d_col:
            nodes = flat[row]
            at = nodes.index(self.cursor) if self.cursor in nodes else 0
            self.cursor = nodes[max(0, min(len(nodes) - 1, at + d_col))]
            return
        pos = self.graph.node(self.cursor).pos
        r = row + d_row
        while 0 <= r < len(flat) and not flat[r]:
            r += d_row
        if 0 <= r < len(flat):
            self.cursor = min(flat[r], key=lambda i: abs(self.graph.node(i).pos - pos) if self.graph else 0)

    def node(self) -> Node | None:
        """The node under the cursor."""
        return None if self.graph is None or self.cursor is None else self.graph.node(self.cursor)

    def toggle_mark(self) -> bool:
        """Mark (or unmark) the feature under the cursor; False when it is not a feature."""
        node = self.node()
        if node is None or node.kind.value != "feature":
            return False
        self.marked ^= {node.index}
        return True

    def chosen(self) -> list[int]:
        """The features an intervention switches off: the marked ones, else the cursor's."""
        if self.marked:
            return sorted(self.marked)
        node = self.node()
        return [node.index] if node is not None and node.kind.value == "feature" else []

    def edges(self, limit: int = 6) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """The cursor node's strongest kept incoming and outgoing edges: (node, weight)."""
        g, p = self.graph, self.pruned
        if g is None or p is None or self.cursor is None:
            return [], []
        adj, mask, i = g.adjacency, p.edge_mask, self.cursor
        incoming = [(int(j), float(adj[i, j])) for j in mask[i].nonzero().flatten().tolist()]
        outgoing = [(int(j), float(adj[j, i])) for j in mask[:, i].nonzero().flatten().tolist()]
        incoming.sort(key=lambda e: -abs(e[1]))
        outgoing.sort(key=lambda e: -abs(e[1]))
        return incoming[:limit], outgoing[:limit]


def _short(node: Node, width: int) -> str:
    kind = node.kind.value
    if kind == "feature":
        text = f"#{node.id} {node.label}"
    elif kind == "error":
        text = "◆ error"
    elif kind == "logit":
        text = f"{node.label} {node.activation:.2f}"
        if len(text) > width:  # a cut probability misreads ("p 1." for 1.00): the token alone
            text = node.label
    else:
        text = node.label
    return text[:width].ljust(width)


def draw_graph(view: CircuitView, width: int) -> list[Line]:
    """The grid: one band per row (as tall as its fullest cell, up to CELL_NODES), a
    column per position headed by its token."""
    g = view.graph
    if g is None:
        return [[("no graph yet: type a prompt and press enter (the run's transcoders/ folder, or t to name one)", "dim")]]
    # every position gets a column (a 13-token prompt fits beside the side panel): narrow
    # columns cut labels, missing ones hide the logits at the last position
    col = max(3, min(14, (width - LABEL_WIDTH) // max(1, g.n_pos) - 1))
    lines: list[Line] = [[(" " * LABEL_WIDTH, "")] + [(lab[:col].ljust(col) + " ", "bold") for lab in g.token_labels]]
    for label, cells in view.rows():
        height = max(1, min(CELL_NODES, max(len(c) for c in cells)))
        for k in range(height):
            line: Line = [((label if k == 0 else "").ljust(LABEL_WIDTH), "dim")]
            for cell in cells:
                line.append(_cell_segment(view, cell, k, height, col))
            lines.append(line)
    return lines


def _cell_segment(view: CircuitView, cell: list[int], k: int, height: int, col: int) -> Segment:
    g = view.graph
    assert g is not None
    if k == height - 1 and len(cell) > height:
        return (f"+{len(cell) - height + 1} more".ljust(col) + " ", "dim")
    if k >= len(cell):
        return (" " * (col + 1), "")
    index = cell[k]
    node = g.node(index)
    style = {"feature": "cyan", "error": "red", "token": "green", "logit": "yellow"}[node.kind.value]
    if index in view.marked:
        style += " underline"
    if index == view.cursor:
        style += " reverse"
    return (_short(node, col) + " ", style)


def describe(view: CircuitView) -> list[Line]:
    """The side panel: the node under the cursor, its strongest edges, the last check."""
    node = view.node()
    g = view.graph
    if node is None or g is None or view.pruned is None:
        return [[("arrows move along the nodes", "dim")]]
    kind = node.kind.value
    where = f"layer {node.layer}, " if kind in ("feature", "error") else ""
    lines: list[Line] = [[(f"{kind} ", "bold"), (f"{node.label}", "cyan"), (f"  ({where}pos {node.pos})", "dim")]]
    if kind == "feature":
        lines.append([(f"feature {node.id}, activation {node.activation:.3f}", "")])
    if kind == "logit":
        lines.append([(f"p = {node.activation:.3f}", "")])
    influence = float(view.pruned.cumulative_scores[node.index])
    lines.append([(f"cumulative influence {influence:.2f}", "dim")])
    incoming, outgoing = view.edges()
    for title, edges in (("strongest in", incoming), ("strongest out", outgoing)):
        lines.append([(title, "bold")])
        if not edges:
            lines.append([("  none kept", "dim")])
        for other, weight in edges:
            n = g.node(other)
            style = "green" if weight > 0 else "red"
            where = f"L{n.layer} " if n.kind.value in ("feature", "error") else ""
            lines.append([(f"  {weight:+8.3f} ", style), (f"{n.kind.value} {where}p{n.pos} {n.label}"[:30], "")])
    qk = qk_lines(view)
    c = view.carriers
    if c is not None and view.cursor in (c.source, c.target):  # asked about here (a): the answer first
        return [*lines[:2], *qk, *lines[2:], *check_lines(view)]
    return [*lines, *check_lines(view), *qk]


def check_lines(view: CircuitView) -> list[Line]:
    """The last intervention: each logit's real change beside the graph's prediction."""
    if not view.checks:
        return []
    what = "off" if view.scale == 0.0 else f"x{view.scale:g}"
    lines: list[Line] = [[(f"{len(view.checked)} feature(s) {what}: logit change, real vs graph", "bold")]]
    for check in view.checks:
        lines.append([(f"  {check.label[:10]:<10} ", ""), (f"{check.real:+8.3f}", "magenta"),
                      (f"  graph {check.predicted:+8.3f}", "dim")])
    return lines


def title(view: CircuitView) -> str:
    """The line above the graph: what it is, its scores, where in the history."""
    g = view.graph
    if g is None:
        return "Circuit: an attribution graph over transcoders (circuit-tracer's method)"
    replacement, completeness = view.scores
    step = f" · step {g.step}" if g.step is not None else ""
    history = ""
    if view.steps:
        at = "now" if view.step_index is None else f"{view.step_index + 1}/{len(view.steps)}"
        history = f" · history {at} ([ ])"
    kept = int(view.pruned.node_mask[: g.n_features].sum()) if view.pruned is not None else 0
    return (f"{g.model_name}{step}{history} · {g.n_features} features ({kept} kept) · "
            f"replacement {replacement:.2f} · completeness {completeness:.2f}")


def _part(label: str) -> str:
    """A QK part's label as the narrow side panel shows it: token parts without their 'tok '."""
    return label.removeprefix("tok ").replace(" x tok ", " x ")


def qk_lines(view: CircuitView, width: int = 38) -> list[Line]:
    """The heads carrying the edge asked about (``a``), then the top head's QK tracing: its
    score at (query, key), the top pairs and each side's strongest parts."""
    c, g = view.carriers, view.graph
    if c is None or g is None:
        return []
    source, target = g.node(c.source), g.node(c.target)
    lines: list[Line] = [[("edge ", "bold"), (f"{source.label} p{source.pos} -> {target.label} p{target.pos} "
                                                 f"{c.edge:+.3f}"[: width - 5], "")]]
    if not c.carriers:
        return [*lines, [("  no head moves it (same position)", "dim")]]
    lines.append([("carried by", "bold")])
    for carrier in c.carriers[:3]:
        lines.append([(f"  {carrier.name:<7}", "cyan"), (f"{carrier.share:+8.3f}", ""),
                      (f"  attending {carrier.query}->{carrier.key}", "dim")])
    t = view.qk
    if t is None:
        return lines
    lines.append([(f"QK L{t.layer}.H{t.head} {t.query}->{t.key}: ", "bold"),
                  (f"score {t.score:+.2f} (w {t.weight:.2f})", "")])
    lines.append([("top pairs (query x key)", "bold")])
    for q, k, v in t.top_pairs(4):
        lines.append([(f"  {v:+6.2f} ", "green" if v > 0 else "red"), (f"{_part(q.label)} x {_part(k.label)}"[: width - 9], "")])
    for side, parts in (("query side", t.top_q(3)), ("key side", t.top_k(4))):
        lines.append([(side, "bold")])
        for part, v in parts:
            lines.append([(f"  {v:+6.2f} ", "green" if v > 0 else "red"), (_part(part.label)[: width - 9], "")])
    return lines
