"""`tfx-lab presets [--json]`: the shipped presets and the user's own, each checked."""

from __future__ import annotations

import argparse
from typing import TypedDict

from .shared import Subparsers, add_json, console, emit_json


class PresetRow(TypedDict):
    """One preset as ``presets --json`` lists it (``error``: why it does not load)."""

    name: str
    path: str
    shipped: bool
    description: str
    arch: str | None
    task: str | None
    error: str | None


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("presets", help="list presets")
    add_json(s)
    s.set_defaults(handler=presets)


def presets(args: argparse.Namespace) -> int:
    """List shipped and user presets; one that does not load shows its error in its row."""
    from tui_lab.core.config.lab_config import ConfigError, load_file
    from tui_lab.core.config.presets import list_presets

    rows: list[PresetRow] = []
    for info in list_presets():
        try:
            cfg = load_file(info.path)
            rows.append({
                "name": info.name,
                "path": str(info.path),
                "shipped": info.shipped,
                "description": info.description,
                "arch": cfg.model.arch,
                "task": cfg.task.name,
                "error": None,
            })
        except ConfigError as exc:
            rows.append({"name": info.name, "path": str(info.path), "shipped": info.shipped,
                         "description": "", "arch": None, "task": None, "error": str(exc)})
    if args.json:
        emit_json(rows)
        return 0
    from rich.table import Table

    table = Table(title="Presets", title_justify="left")
    for col in ("name", "kind", "arch", "task", "description"):
        table.add_column(col)
    for r in rows:
        desc = r["description"] if not r["error"] else f"[red]{r['error']}[/]"
        table.add_row(r["name"], "shipped" if r["shipped"] else "user", r["arch"] or "-",
                      r["task"] or "-", desc)
    console().print(table)
    return 0
