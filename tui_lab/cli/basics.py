"""`tfx-lab basics TOPIC`: the tutorials' pictures (positions, masks, scaling, schedule) as numbers.

The same core functions as the lab's basics screen (``b``), on a preset's
freshly built model, a run's weights or a real model opened from files.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tui_lab.core.decoding.attention_text import shade
from tui_lab.core.verbs.basics import TOPICS

from .shared import Subparsers, add_json, add_model, emit_json, load_target

if TYPE_CHECKING:
    from tui_lab.core.verbs.basics import (
        MasksData,
        PositionsData,
        Result,
        ScalingData,
        ScalingFields,
        ScheduleData,
    )

SHOWN_DIMS = 64  # table columns drawn in text (JSON has them all)
SCHEDULE_ROWS = 12  # steps listed in text


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser(
        "basics", help="the tutorials' pictures from a model: positions, masks, scaling, schedule"
    )
    s.add_argument("topic", choices=TOPICS, metavar="TOPIC", help=", ".join(TOPICS))
    group = s.add_mutually_exclusive_group()
    group.add_argument("--preset", help="preset name or YAML path: its freshly built model (default: copy)")
    group.add_argument("--run", help="run folder: its trained weights")
    add_model(s, group)
    s.add_argument("--input", help="masks, scaling: an input to put in the padded batch")
    s.add_argument("--length", type=int, default=16, help="positions: how many (default 16)")
    add_json(s)
    s.set_defaults(handler=basics)


def basics(args: argparse.Namespace) -> int:
    """Print one topic's numbers (JSON with --json)."""
    from tui_lab.core.errors import LabError
    from tui_lab.core.verbs.basics import Request, run

    request = Request(args.topic, args.preset, args.input, args.length, named=str(args.model or args.run or ""))
    if args.model or args.run:
        in_hand = load_target(args)
    elif args.revision and args.topic != "schedule":  # the schedule of a preset never read it
        raise LabError("--revision goes with --model")
    else:
        in_hand = None
    result = run(request, in_hand)
    if args.json:
        emit_json(result.to_json())
    else:
        print(f"{args.topic}: {result.source}")
        for line in topic_lines(result):
            print(line)
    return 0


def topic_lines(result: Result) -> list[str]:
    """The lines that say the result's numbers."""
    if result.positions is not None:
        return _positions_text(result.positions)
    if result.masks is not None:
        return _masks_text(result.masks)
    if result.scaling is not None:
        return _scaling_text(result.scaling)
    assert result.schedule is not None  # one topic is always set
    return _schedule_text(result.schedule)


def _shades(row: list[float], low: float, high: float) -> str:
    span = (high - low) or 1.0
    return "".join(shade((v - low) / span) for v in row)


def _positions_text(d: PositionsData) -> list[str]:
    if d["kind"] == "none":
        return [d["what"]]
    table, sim = d["table"], d["similarity"]
    flat = [v for row in table for v in row]
    low, high = min(flat), max(flat)
    lines = [f"{d['kind']}: {d['what']}",
             f"table, position x dimension ({d['length']} x {d['dims']}; shade from {low:.3g} to {high:.3g}):"]
    lines += [f"{i:>4} {_shades(row[:SHOWN_DIMS], low, high)}" for i, row in enumerate(table)]
    lines.append("first values: " + ", ".join(
        f"[{i}, {j}] = {table[i][j]:.4f}" for i, j in ((1, 0), (1, 1), (2, 0)) if i < len(table) and j < len(table[i])
    ))
    flat = [v for row in sim for v in row]
    lines.append(f"dot product of each position with the others (shade from {min(flat):.3g} to {max(flat):.3g}):")
    lines += [f"{i:>4} {_shades(row, min(flat), max(flat))}" for i, row in enumerate(sim)]
    return lines


def _grid(name: str, grid: list[list[int]], labels: list[str]) -> list[str]:
    lines = [f"{name} (rows: queries, columns: keys; █ may attend, · masked):"]
    for label, row in zip(labels, grid, strict=True):
        lines.append(f"{(label or 'pad')[:6]:>6} " + "".join("█" if v else "·" for v in row))
    return lines


def _masks_text(d: MasksData) -> list[str]:
    labels = d["tokens"]
    lines = [f"batch: {len(d['texts'])} rows of lengths {d['lengths']}, padded to {len(labels)}; "
             f"row {d['row']} shown: {' '.join(x or '·' for x in labels)}"]
    names: tuple[str, ...] = ("padding", "causal", "combined")
    if d.get("encoder"):  # the model attends both ways: a decoder's causal mask is for comparison
        lines.append("an encoder-only model: its self-attention is masked by padding alone "
                     "(the causal grid is a decoder's, for comparison)")
        names = ("padding", "causal")
    grids = {"padding": d["padding"], "causal": d["causal"], "combined": d["combined"]}
    for name in names:
        lines += _grid(name, grids[name], labels)
    lines.append(f"{d['module']} head {d['head']}, query {d['query']} ({labels[d['query']]}):")
    lines.append("  key     " + " ".join(f"{(x or 'pad')[:6]:>6}" for x in labels))
    lines.append("  before  " + " ".join(f"{v:6.3f}" for v in d["before"]))
    lines.append("  after   " + " ".join(f"{v:6.3f}" for v in d["after"]))
    return lines


def _scaling_rows(rows: list[ScalingFields]) -> list[str]:
    out = [f"{'':16} {'d_k':>5} {'var q.k':>9} {'/sqrt(d_k)':>10} {'H raw':>7} {'H scaled':>8} {'H max':>6}"]
    for r in rows:
        out.append(f"{r['name']:16} {r['d_k']:>5} {r['var_raw']:9.3f} {r['var_scaled']:10.3f} "
                   f"{r['entropy_raw']:7.3f} {r['entropy_scaled']:8.3f} {r['entropy_max']:6.3f}")
    return out


def _scaling_text(d: ScalingData) -> list[str]:
    lines = ["the model's q, k on the example batch (H: mean softmax row entropy, nats):"]
    lines += _scaling_rows(d["model"])
    scales = {r["model_scale"] for r in d["model"] if r["model_scale"] is not None}
    if scales:
        lines.append(f"(this model multiplies q.k by {', '.join(f'{s:g}' for s in sorted(scales))} itself)")
    lines.append("random q, k with unit-variance entries, 16 keys per row:")
    lines += _scaling_rows(d["random"])
    return lines


def _schedule_text(d: ScheduleData) -> list[str]:
    steps = d["steps"]
    pick = sorted({steps[round(i * (len(steps) - 1) / (SCHEDULE_ROWS - 1))] for i in range(SCHEDULE_ROWS)}
                  | ({d["warmup"]} if d["warmup"] in steps else set()))
    by_step = dict(zip(steps, zip(d["lr"], d["noam"], strict=True), strict=True))
    lines = [f"schedule {d['schedule']} over {d['total']:,} steps, warmup {d['warmup']}; "
             f"Noam: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), d_model {d['d_model']}"]
    if d["by_time"]:
        lines.append("(decay_over: time; drawn by steps)")
    lines.append(f"{'step':>8} {'lr':>11} {'noam':>11}")
    lines += [f"{s:>8,} {by_step[s][0]:11.4e} {by_step[s][1]:11.4e}" for s in pick]
    lines.append(f"peak: lr {d['lr_peak']['lr']:.4e} at step {d['lr_peak']['step']:,}; "
                 f"noam {d['noam_peak']['lr']:.4e} at step {d['noam_peak']['step']:,}")
    return lines

