"""``python -m bench.grokking SWEEP_DIR``: the grokking sweep's table, per weight-decay arm.

Reads a finished (or running) ``tfx-lab sweep grokking`` folder and prints, per
arm, the steps (and training seconds) to 100% training accuracy and to 99%
held-out accuracy as mean +- std over the seeds that got there, with how many
did. ``--json`` prints the same as one object. Nothing is timed here: the
seconds are the runs' own ``elapsed``, as their metrics recorded them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tui_lab.core.runs.curves import Curve, first_step_at, read_curves
from tui_lab.core.sweeps.record import arm_groups
from tui_lab.core.sweeps.stats import format_spread, spread

TRAIN_DONE = 1.0
HELD_OUT_DONE = 0.99


def _at(curve: Curve, threshold: float) -> tuple[int | None, float | None]:
    step = first_step_at(curve, threshold)
    if step is None:
        return None, None
    return step, curve.seconds[curve.steps.index(step)]


def arm_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per arm: seeds, and the spread of steps/seconds to each milestone."""
    rows = []
    for group in arm_groups(sweep_dir):
        found = [read_curves(r) for r in group.runs if (r / "metrics.jsonl").is_file()]
        train = [_at(c.train_accuracy, TRAIN_DONE) for c in found]
        held = [_at(c.exact_match, HELD_OUT_DONE) for c in found]
        rows.append({
            "arm": group.label,
            "seeds": len(found),
            "steps_to_train_100": spread([s for s, _ in train]),
            "seconds_to_train_100": spread([t for _, t in train]),
            "steps_to_held_out_99": spread([s for s, _ in held]),
            "seconds_to_held_out_99": spread([t for _, t in held]),
            "last_step": spread([float(c.train_loss.steps[-1]) if c.train_loss.steps else None for c in found]),
            "final_held_out": spread([c.exact_match.values[-1] if c.exact_match.values else None for c in found]),
        })
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The README's table."""
    def cell(s: dict[str, Any], of: int, fmt: str = "{:.0f}") -> str:
        mean, std = fmt.format(s["mean"]) if s["n"] else "-", fmt.format(s["std"]) if s["n"] else ""
        text = f"{mean} ± {std}" if s["n"] > 1 else mean
        return f"{text} ({s['n']}/{of})" if s["n"] < of else text

    lines = [
        "| arm | seeds | steps to 100% train | steps to 99% held-out | held-out accuracy at the end | steps run |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = r["seeds"]
        lines.append(
            f"| {r['arm']} | {n} | {cell(r['steps_to_train_100'], n)} | {cell(r['steps_to_held_out_99'], n)} "
            f"| {cell(r['final_held_out'], n, '{:.3f}')} | {format_spread(r['last_step'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.grokking", description=__doc__.splitlines()[0])
    p.add_argument("sweep_dir", type=Path)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = arm_rows(args.sweep_dir)
    if not rows:
        print(f"{args.sweep_dir}: no sweep.json with arms", file=sys.stderr)
        return 2
    print(json.dumps(rows, indent=1) if args.json else markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
