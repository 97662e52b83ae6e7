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
    from tui_lab.core.verbs.params import Request, run

    result = run(Request(args.preset), load_target(args) if args.model is not None else None)
    report = result.report
    if args.json:
        emit_json(result.to_json())
        return 0
    from rich.table import Table

    table = Table(title=f"Parameters of {result.name}", title_justify="left")
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
