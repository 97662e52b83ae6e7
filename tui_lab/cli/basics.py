"""`tfx-lab basics TOPIC`: the tutorials' pictures (positions, masks, scaling, schedule) as numbers.

The same core functions as the lab's basics screen (``b``), on a preset's
freshly built model, a run's weights or a real model opened from files.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypedDict

from tui_lab.core.decoding.attention_text import shade

from .shared import Subparsers, add_json, add_model, emit_json

if TYPE_CHECKING:
    from collections.abc import Mapping

    from torch import Tensor, nn

    from tui_lab.core.analysis.basics.basics_scaling import ScalingRow
    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.tasks.protocol import Task

Grid = list[list[float]]


class PositionsData(TypedDict):
    """``basics positions``: the positional table and its positions' dot products."""

    kind: str
    what: str
    length: int
    dims: int
    base: float | None
    rotated_dims: int | None
    table: Grid
    similarity: Grid


class MasksData(TypedDict):
    """``basics masks``: the padded batch, its three masks and one attention row before and after."""

    texts: list[str]
    lengths: list[int]
    row: int
    tokens: list[str]
    padding: list[list[int]]
    causal: list[list[int]]
    combined: list[list[int]]
    module: str
    head: int
    query: int
    before: list[float]
    after: list[float]
    encoder: bool


class ScalingFields(TypedDict):
    """One ``ScalingRow`` (a module's q.k, or random ones) with its fields as keys."""

    name: str
    d_k: int
    var_q: float
    var_k: float
    var_raw: float
    var_scaled: float
    entropy_raw: float
    entropy_scaled: float
    entropy_max: float
    model_scale: float | None


class ScalingData(TypedDict):
    """``basics scaling``: the model's modules and random q, k."""

    model: list[ScalingFields]
    random: list[ScalingFields]


class Peak(TypedDict):
    step: int
    lr: float


class ScheduleData(TypedDict):
    """``basics schedule``: the learning rate and Noam's over the steps, and their peaks."""

    schedule: str
    d_model: int
    warmup: int
    total: int
    by_time: bool
    steps: list[int]
    lr: list[float]
    noam: list[float]
    lr_peak: Peak
    noam_peak: Peak

TOPICS = ("positions", "masks", "scaling", "schedule")
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


def open_target(args: argparse.Namespace) -> tuple[LabConfig, nn.Module, Task, str]:
    """(config, model, task, what it is) for --preset, --run or --model."""
    from tui_lab.core.errors import LabError

    if args.revision and not args.model:
        raise LabError("--revision goes with --model")
    if args.model:
        from .shared import load_target

        loaded = load_target(args)
        return loaded.config, loaded.model, loaded.task, f"{args.model} (opened from files)"
    if args.run:
        from .shared import load_target

        loaded = load_target(args)
        return loaded.config, loaded.model, loaded.task, f"{args.run} at step {loaded.step:,}"
    from tui_lab.core.analysis.basics.basics_example import fresh_model
    from tui_lab.core.config.presets import load_preset

    config = load_preset(args.preset)
    model, task = fresh_model(config)
    return config, model, task, f"preset {config.name} (untrained: initial weights)"


def basics(args: argparse.Namespace) -> int:
    """Print one topic's numbers (JSON with --json)."""
    from tui_lab.core.errors import LabError

    if args.length <= 0:
        raise LabError(f"--length: must be > 0, got {args.length}")
    if args.topic == "schedule" and not (args.model or args.run):
        # The schedule needs no model: skip building one.
        from tui_lab.core.config.presets import load_preset

        config = load_preset(args.preset)
        model: nn.Module | None = None
        task: Task | None = None
        source = f"preset {config.name}"
    else:
        config, model, task, source = open_target(args)
    data, lines = topic_data(args.topic, config, model, task, args.input, args.length)
    if args.json:
        emit_json({"topic": args.topic, "source": source, **data})
    else:
        print(f"{args.topic}: {source}")
        for line in lines:
            print(line)
    return 0


def topic_data(topic: str, config: LabConfig, model: nn.Module | None, task: Task | None, text: str | None,
               length: int) -> tuple[Mapping[str, object], list[str]]:
    """One topic's numbers as plain JSON values, and the lines that say them (only the
    schedule needs no ``model``)."""
    if topic == "schedule":
        schedule = _schedule_data(config)
        return schedule, _schedule_text(schedule)
    assert model is not None and task is not None  # every other topic reads the model
    if topic == "positions":
        positions = _positions_data(model, length)
        return positions, _positions_text(positions)
    if topic == "masks":
        masks = _masks_data(model, task, config, text)
        return masks, _masks_text(masks)
    if topic == "scaling":
        scaling = _scaling_data(model, task, config, text)
        return scaling, _scaling_text(scaling)
    raise ValueError(f"no such topic: {topic}")


def _positions_data(model: nn.Module, length: int) -> PositionsData:
    from tui_lab.core.analysis.basics.basics_positions import position_picture

    p = position_picture(model, length)
    return {
        "kind": p.kind, "what": p.what, "length": p.length,
        "dims": int(p.table.size(1)) if p.table.ndim == 2 else 0,
        "base": p.base, "rotated_dims": p.rotated_dims,
        "table": _rounded_grid(p.table), "similarity": _rounded_grid(p.similarity),
    }


def _masks_data(model: nn.Module, task: Task, config: LabConfig, text: str | None) -> MasksData:
    from tui_lab.core.analysis.basics.basics_masks import mask_picture

    m = mask_picture(model, task, config.model.arch, text)
    return {
        "texts": m.batch.texts, "lengths": m.batch.lengths, "row": m.row, "tokens": m.labels,
        "padding": m.padding.int().tolist(), "causal": m.causal.int().tolist(),
        "combined": m.combined.int().tolist(), "module": m.module, "head": m.head,
        "query": m.query, "before": _numbers(m.before), "after": _numbers(m.after),
        "encoder": m.encoder,
    }


def _scaling_data(model: nn.Module, task: Task, config: LabConfig, text: str | None) -> ScalingData:
    from tui_lab.core.analysis.basics.basics_scaling import scaling_random, scaling_real

    return {"model": [_scaling_fields(r) for r in scaling_real(model, task, config.model.arch, text)],
            "random": [_scaling_fields(r) for r in scaling_random()]}


def _scaling_fields(r: ScalingRow) -> ScalingFields:
    """A row as ``dataclasses.asdict`` writes it (the JSON's key order)."""
    return {"name": r.name, "d_k": r.d_k, "var_q": r.var_q, "var_k": r.var_k, "var_raw": r.var_raw,
            "var_scaled": r.var_scaled, "entropy_raw": r.entropy_raw, "entropy_scaled": r.entropy_scaled,
            "entropy_max": r.entropy_max, "model_scale": r.model_scale}


def _schedule_data(config: LabConfig) -> ScheduleData:
    from tui_lab.core.analysis.basics.basics_schedule import schedule_picture

    s = schedule_picture(config)
    (lr_step, lr_top), (noam_step, noam_top) = s.lr_peak, s.noam_peak
    return {
        "schedule": s.schedule, "d_model": s.d_model, "warmup": s.warmup, "total": s.total,
        "by_time": s.by_time, "steps": s.steps, "lr": s.lr, "noam": s.noam,
        "lr_peak": {"step": lr_step, "lr": lr_top}, "noam_peak": {"step": noam_step, "lr": noam_top},
    }


def _numbers(t: Tensor) -> list[float]:
    """A 1-D tensor's numbers, each rounded to 6 places."""
    return [round(float(v), 6) for v in t.tolist()]


def _rounded_grid(t: Tensor) -> Grid:
    """A 2-D tensor's rows of numbers, each rounded to 6 places."""
    return [_numbers(row) for row in t]


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

