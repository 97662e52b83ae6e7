"""`tfx-lab probe (--run DIR | --model SOURCE) (--variable NAME | --labels FILE) [--stack S] [--history]`:
linear probes at every layer and position class, with a shuffled-label control; over a
run's history, probe accuracy by layer x step."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .progress import CountLine
from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_run_or_model,
    emit_json,
    load_target,
    target_name,
)

if TYPE_CHECKING:
    from tui_lab.core.analysis.probes.linear_probe import ProbeTable
    from tui_lab.core.analysis.probes.probe_history import HistoryGrid


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("probe", help="linear probes for a task variable or labels at every layer (and over history)")
    add_run_or_model(s)
    what = s.add_mutually_exclusive_group(required=True)
    what.add_argument("--variable", metavar="NAME",
                      help="a variable the run's task declares: carry (addition), rank (sort), source (copy, "
                           "reverse), residue (modular-addition)")
    what.add_argument("--labels", metavar="FILE",
                      help="lines TEXT<TAB>LABEL, or one label per token of TEXT separated by spaces")
    s.add_argument("--position", metavar="P", help="with --history: the position class to follow (default all)")
    s.add_argument("--examples", type=int, default=1000, metavar="N", help="task examples to probe (default 1000)")
    s.add_argument("--stack", choices=("encoder", "decoder"),
                   help="an encoder-decoder's stream to read: encoder (each input position) or decoder "
                        "(default: where the variable is read)")
    s.add_argument("--sae", metavar="DIR", help="an SAE folder: add a k-sparse probe over its features at its hook")
    s.add_argument("--k", type=int, default=8, help="features the sparse probe keeps (default 8)")
    s.add_argument("--history", action="store_true", help="probe every history snapshot of --run too")
    s.add_argument("--snapshots", type=int, default=10, metavar="N", help="with --history: at most N (default 10)")
    s.add_argument("--seed", type=int, default=0, help="examples, splits and shuffles (default 0)")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=probe)


def probe(args: argparse.Namespace) -> int:
    """Probe accuracy by layer and position, controls, the best probe; the history's heatmap."""
    from tui_lab.core.errors import LabError
    from tui_lab.core.verbs.probe import Request, run

    if args.history and args.run is None:
        raise LabError("--history reads a run's snapshots: give --run DIR")
    request = Request(args.variable, args.labels, args.position, args.examples, args.seed, args.sae, args.k,
                      args.run if args.history else None, args.snapshots, args.stack)
    counter = CountLine("probing", enabled=not args.json)
    try:
        result = run(request, load_target(args, "cpu", args.at_step), lambda done, total, _what: counter(done, total))
    finally:
        counter.close()
    if args.json:
        emit_json({"run" if args.model is None else "model": target_name(args), **result.to_json()})
        return 0
    print(f"{target_name(args)}: probes for {result.what} (held-out accuracy; control on shuffled labels)")
    print_table(result.table)
    if result.sparse is not None:
        s = result.sparse
        print(f"sparse probe at {s.hook}: k={len(s.features)} features {s.features}: "
              f"{s.accuracy:.3f} (control {s.control:.3f})")
    if result.history is not None:
        print_grid(result.history.readable)
    return 0


def print_table(table: ProbeTable) -> None:
    """One row per layer: each position's accuracy and, in brackets, its control."""
    width = max(len(h) for h in table.hooks)
    cell = max(18, *(len(c) + 2 for c in table.classes))  # an encoder's class: "column 1 @ b digit 0"
    print(f"{'layer':<{width + 4}}" + "".join(f"{c:>{cell}}" for c in table.classes))
    for layer, (hook, row) in enumerate(zip(table.hooks, table.scores, strict=True)):
        cells = "".join(f"{'-':>{cell}}" if s is None else f"{s.accuracy:>{cell - 9}.3f} ({s.control:.3f})"
                        for s in row)
        print(f"{layer:<3} {hook:<{width}}{cells}")
    best = table.best()
    if best is not None:
        layer, c, score = best
        print(f"best: layer {layer} ({table.hooks[layer]}), {table.classes[c]}: {score.accuracy:.3f} "
              f"(control {score.control:.3f}, chance {score.chance:.3f})")


def print_grid(grid: HistoryGrid) -> None:
    """The history's heatmap: a row per layer, a shade per step, the first step that reaches the threshold."""
    from tui_lab.core.decoding.attention_text import shade

    print(f"{grid.what} by layer x step ({len(grid.steps)} snapshots: {grid.steps[0]}..{grid.steps[-1]})")
    for layer, row in enumerate(grid.values):
        cells = "".join("·" if v is None else shade(v) * 2 for v in row)
        values = " ".join("  - " if v is None else f"{v:.2f}" for v in row)
        print(f"  {layer:<3}{cells}  {values}")
    first = grid.first_step()
    print(f"first step at >= {grid.threshold:.2f}: {'none' if first is None else first}")
