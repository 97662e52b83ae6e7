"""`tfx-lab params (--preset P | --model SOURCE) [--json]`: a preset's parameter breakdown, before
anything is built, or a real model's, counted on its weights."""

from __future__ import annotations

import argparse

from .shared import MODEL_HELP, Subparsers, add_json, console, emit_json, load_target


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("params", help="parameter breakdown of a preset or a real model")
    which = s.add_mutually_exclusive_group()
    which.add_argument("--preset", default=None, help="preset name or YAML path (default: copy)")
    which.add_argument("--model", metavar="SOURCE", help=MODEL_HELP)
    s.add_argument("--revision", help="with --model: a branch or commit of the cached model")
    add_json(s)
    s.set_defaults(handler=params)


def params(args: argparse.Namespace) -> int:
    """Parameter breakdown of a preset: rows, total, memory and FLOPs per token."""
    from tui_lab.core.config.presets import load_preset

    if args.model is not None:
        from tui_lab.core.model.params import report_for_model

        loaded = load_target(args)
        cfg = loaded.config
        report = report_for_model(loaded.model, cfg.model.max_len)
    else:
        cfg = load_preset(args.preset)  # a bad preset is refused before torch is imported
        from tui_lab.core.model.params import parameter_report
        from tui_lab.core.tasks import make_task

        report = parameter_report(cfg.model, len(make_task(cfg.task).vocab))
    if args.json:
        emit_json({
            "model" if args.model is not None else "preset": cfg.name,
            "total": report.total,
            "rows": [{"name": r.name, "params": r.params, "group": r.group} for r in report.rows],
            "fp32_bytes": report.fp32_bytes,
            "bf16_bytes": report.bf16_bytes,
            "train_flops_per_token": report.train_flops_per_token,
            "infer_flops_per_token": report.infer_flops_per_token,
        })
        return 0
    from rich.table import Table

    table = Table(title=f"Parameters of {cfg.name}", title_justify="left")
    table.add_column("component")
    table.add_column("params", justify="right")
    table.add_column("%", justify="right")
    table.add_column("")
    total = max(1, report.total)
    for r in report.rows:
        share = r.params / total
        table.add_row(r.name, f"{r.params:,}", f"{share:.1%}", "█" * round(share * 30))
    table.add_section()
    table.add_row("total", f"{report.total:,}", "100%", "")
    out = console()
    out.print(table)
    out.print(
        f"memory: {report.fp32_bytes / 2**20:.1f} MiB fp32, {report.bf16_bytes / 2**20:.1f} MiB bf16; "
        f"FLOPs/token: {report.train_flops_per_token:,.0f} train, "
        f"{report.infer_flops_per_token:,.0f} inference"
    )
    return 0
