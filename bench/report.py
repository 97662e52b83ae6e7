"""The terminal table (rich) and ``bench/RESULTS.md``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from bench.common import Section

NOTES_MARKER = "<!-- notes: everything below this line is kept when the bench rewrites this file -->"


def _status(ok: bool | None) -> str:
    return "" if ok is None else ("pass" if ok else "MISS")


def render_table(sections: list[Section], info: dict[str, Any], total: float, command: str) -> Table:
    table = Table(
        title=f"tfx-lab bench: {command}",
        caption=(
            f"{info['cpu']}, {info['cores']} cores, torch threads {info.get('threads_choice', info['threads'])}, "
            f"torch {info['torch']}; "
            f"load average {info['load_average_1_5_15']} -> {info.get('load_average_after')}; {total:.0f} s"
            + (f"; thread probe: {info['thread_probe']['threads']} threads at "
               f"{info['thread_probe']['speedup_vs_1_thread']:.2f}x the speed of 1" if info.get("thread_probe") else "")
        ),
        show_lines=False,
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("goal", justify="right")
    table.add_column("", justify="center")
    table.add_column("notes", overflow="fold", max_width=70)
    for sec in sections:
        table.add_section()
        table.add_row(f"[bold]{sec.title}[/bold]", "", "", "", f"[dim]{sec.seconds:.0f} s[/dim]")
        if sec.error:
            table.add_row("  error", "", "", "[red]ERROR[/red]", sec.error)
        for row in sec.rows:
            mark = {True: "[green]pass[/green]", False: "[red]MISS[/red]", None: ""}[row.ok]
            table.add_row(f"  {row.item}", row.value, row.goal, mark, row.note)
    return table


def render_markdown(
    sections: list[Section],
    info: dict[str, Any],
    total: float,
    command: str,
    result: dict[str, Any],
    previous: Path,
) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Latest run: `{command}` on {result['date']}, {total:.0f} s in all.",
        "",
        "## Machine",
        "",
        f"- CPU: {info['cpu']}, {info['cores']} cores; torch threads: {info.get('threads_choice', info['threads'])}",
        f"- torch {info['torch']}, Python {info['python']}, CUDA: {info['cuda'] or 'none'}",
        f"- load average (1/5/15 min) before: {info['load_average_1_5_15']}, after: {info.get('load_average_after')}"
        " (other processes share this machine; every figure is a ratio measured side by side)",
        *(
            [f"- thread probe: a copy training step with {info['thread_probe']['threads']} threads ran at "
             f"{info['thread_probe']['speedup_vs_1_thread']:.2f}x the speed of 1 thread"]
            if info.get("thread_probe") else []
        ),
        "",
        "## Table",
        "",
        "| measure | value | goal | | notes |",
        "|---|---:|---:|:-:|---|",
    ]
    for sec in sections:
        lines.append(f"| **{sec.title}** | | | | {sec.seconds:.0f} s |")
        if sec.error:
            lines.append(f"| error | | | ERROR | {_md(sec.error)} |")
        for row in sec.rows:
            lines.append(f"| {_md(row.item.strip())} | {_md(row.value)} | {_md(row.goal)} | {_status(row.ok)} | {_md(row.note)} |")
    headline = {
        k: result.get(k)
        for k in (
            "train_speed_vs_torch", "decoder_speed_vs_torch", "kv_cache_speedup", "capture_overhead",
            "copy_seconds", "reverse_seconds", "sort_seconds", "addition_seconds",
            "first_paint_seconds", "ui_key_latency_p95_ms", "ui_train_throughput_ratio",
        )
    }
    lines += [
        "",
        "Headline keys of `--json`:",
        "",
        "```json",
        json.dumps(headline, indent=1),
        "```",
        "",
        "## Reproduce",
        "",
        "```sh",
        "make bench ARGS=--quick            # or: .venv/bin/python -m bench --quick",
        ".venv/bin/python -m bench --quick --json",
        ".venv/bin/python -m bench --only train_speed_vs_torch,kv_cache_speedup",
        ".venv/bin/python -m bench          # longer windows, nn.Transformer time-to-target for all four tasks",
        "```",
        "",
        "Run from the repository root (`bench` is a top-level package next to `tui_lab`).",
        "`--threads N` fixes torch's thread count for the in-process items and the time-to-target runs (default: the lab's own rule, 1 thread below 2 M parameters).",
        "",
        NOTES_MARKER,
    ]
    notes = ""
    if previous.exists():
        text = previous.read_text(encoding="utf-8")
        if NOTES_MARKER in text:
            notes = text.split(NOTES_MARKER, 1)[1]
    return "\n".join(lines) + (notes if notes else "\n")


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
