"""`tfx-lab heads (--run DIR | --model SOURCE)`: the head atlas's scores for a run (or one of its
history snapshots), or for a real model on the standard repeat probe."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

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
    from tui_lab.core.analysis.heads.atlas import Atlas


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("heads", help="the head atlas: what each attention head does, scored")
    add_run_or_model(s)
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=heads)


def heads(args: argparse.Namespace) -> int:
    """Score every attention head of a run on its task's probe batch (a real model: the
    standard repeat probe over its vocabulary); best first."""
    from tui_lab.core.verbs.heads import Request, run

    lab = load_target(args, "cpu", args.at_step)
    result = run(Request(), lab)
    which = "model" if args.model is not None else "run"
    if args.json:
        emit_json({which: target_name(args), **result.to_json()})
        return 0
    if lab.card is not None:  # --model: opened from files
        print(f"{args.model}: {lab.card.family} model; heads by best score")
    else:
        print(f"{args.run}: step {result.step}, task {result.task}; heads by best score")
    print_atlas(result.atlas)
    return 0


def print_atlas(atlas: Atlas) -> None:
    """The probes, the floor, then a row per head: label, what it is called, best pattern and score."""
    for line in atlas.probe_lines():
        print(line)
    for s in atlas.heads:
        others = "  ".join(f"{k} {v:.2f}" for k, v in s.scores.items() if k != s.best)
        print(
            f"{s.label:<20} {s.shown:<16} {s.best:<10} {s.best_score:5.2f}   {others}  "
            f"entropy {s.entropy:.2f}"
        )
