"""`tfx-lab heads --run DIR`: the head atlas's scores for a run (or one of its history snapshots)."""

from __future__ import annotations

import argparse

from .shared import Subparsers, add_at_step, add_json, add_run, emit_json, load_run


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("heads", help="the head atlas: what each attention head does, scored")
    add_run(s)
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=heads)


def heads(args: argparse.Namespace) -> int:
    """Score every attention head of a run on its task's probe batch; best first."""
    from tui_lab.core.analysis.head_scores import score_heads

    run = load_run(args.run, "cpu", args.at_step)
    scores = score_heads(run.model, run.task, run.config.model.arch)
    if args.json:
        emit_json({
            "run": args.run,
            "step": run.step,
            "task": run.config.task.name,
            "heads": [s.to_dict() for s in scores],
        })
        return 0
    print(f"{args.run}: step {run.step}, task {run.config.task.name}; heads by best score")
    for s in scores:
        others = "  ".join(f"{k} {v:.2f}" for k, v in s.scores.items() if k != s.best)
        print(f"{s.label:<20} {s.best:<10} {s.best_score:5.2f}   {others}  entropy {s.entropy:.2f}")
    return 0
