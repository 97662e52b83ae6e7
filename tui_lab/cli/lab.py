"""Opening the lab: `tfx-lab [--preset P | --run DIR] [--runs-dir DIR]` and `tfx-lab watch DIR`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui_lab.core.errors import LabError

from .shared import Subparsers


def add_options(p: argparse.ArgumentParser) -> None:
    """The top parser's own options: with no command, ``tfx-lab`` opens the lab."""
    p.add_argument("--preset", help="preset name or YAML path for the lab (default: copy)")
    p.add_argument("--run", help="open the lab on an existing run folder")
    p.add_argument("--runs-dir", help="where the lab writes runs (default: ./runs)")
    p.set_defaults(handler=open_lab)


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("watch", help="open the lab following a run another process writes")
    s.add_argument("run", help="run folder")
    s.set_defaults(handler=watch)


def open_lab(args: argparse.Namespace) -> int:
    """Open the lab (the default command)."""
    from tui_lab.core.config.presets import load_preset

    if args.run:
        _require_run_folder(args.run)
    else:
        load_preset(args.preset)  # a bad preset fails here with one line, before the UI starts
    from tui_lab.ui.app import run_lab

    run_lab(preset=args.preset, run_dir=args.run, runs_dir=args.runs_dir)
    return 0


def watch(args: argparse.Namespace) -> int:
    """Open the lab following a run folder another process writes."""
    _require_run_folder(args.run)
    from tui_lab.ui.app import run_lab

    run_lab(run_dir=args.run, follow=True)
    return 0


def _require_run_folder(path: str) -> None:
    p = Path(path)
    if not p.is_dir():
        raise LabError(f"{p}: no such run folder")
