"""`tfx-lab heads`: the head atlas's scores for a run (or one of its history snapshots)."""

from __future__ import annotations

import argparse
import json
import sys


def heads(args: argparse.Namespace) -> int:
    """Score every attention head of a run on its task's probe batch; best first."""
    from tui_lab.core.analysis.head_scores import score_heads
    from tui_lab.core.decoding.inference import load_for_inference

    run = load_for_inference(args.run, "cpu", args.at_step)
    for note in run.notes:
        print(f"note: {note}", file=sys.stderr)
    scores = score_heads(run.model, run.task, run.config.model.arch)
    if args.json:
        print(json.dumps({
            "run": args.run,
            "step": run.step,
            "task": run.config.task.name,
            "heads": [s.to_dict() for s in scores],
        }))
        return 0
    print(f"{args.run}: step {run.step}, task {run.config.task.name}; heads by best score")
    for s in scores:
        others = "  ".join(f"{k} {v:.2f}" for k, v in s.scores.items() if k != s.best)
        print(f"{s.label:<20} {s.best:<10} {s.best_score:5.2f}   {others}  entropy {s.entropy:.2f}")
    return 0
