"""``tfx-lab export --tensorboard RUN... [--out DIR]``: runs as TensorBoard event files.

Every run goes to its own folder under one ``--out`` (default ``./tensorboard``,
next to the default ``./runs``), so ``tensorboard --logdir <out>`` shows them
side by side. The writing is ``core.runs.tensorboard_export``'s.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from tui_lab.core.errors import LabError

from .runs import expand_runs, short_names
from .shared import Subparsers, print_error

DEFAULT_OUT = "tensorboard"


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("export", help="write runs in formats other tools read")
    s.add_argument("runs", nargs="+", metavar="RUN", help="run folders (a sweep folder: its runs)")
    s.add_argument("--tensorboard", action="store_true", required=True,
                   help="TensorBoard event files (needs: pip install 'tfx-lab[tensorboard]')")
    s.add_argument("--out", help="one folder for all runs, a sub-folder per run "
                   f"(default: ./{DEFAULT_OUT})")
    s.set_defaults(handler=export)


def export(args: argparse.Namespace) -> int:
    """Export each run (a sweep folder: its runs); one line per run, then how to look."""
    if not args.tensorboard:
        raise LabError("say what to export to: --tensorboard")
    from tui_lab.core.runs.tensorboard_export import export_run, summary_writer_class

    summary_writer_class()  # a missing extra is one error, before any run is read
    folders = expand_runs(args.runs)
    out = Path(args.out) if args.out else Path(DEFAULT_OUT)
    failed = done = 0
    for folder, name in zip(folders, unique_names(folders), strict=True):
        try:
            result = export_run(folder, out, name)
        except LabError as exc:
            print_error(exc)
            failed += 1
            continue
        done += 1
        again = "; replaced the earlier export" if result.replaced else ""
        print(f"{name}: {result.points} points ({_count(result.steps, 'step')}, "
              f"{_count(result.evals, 'evaluation')}) -> {result.folder}{again}")
    if done:
        print(f"view them: tensorboard --logdir {shlex.quote(str(out))}")
    return 2 if failed else 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def unique_names(folders: list[Path]) -> list[str]:
    """Each run's event folder name: its folder's name, ``parent/name`` where two share one
    (two sweeps' ``s0``), with ``-2``, ``-3``... if even that repeats."""
    names: list[str] = []
    for name in short_names(folders):
        candidate, n = name, 2
        while candidate in names:
            candidate, n = f"{name}-{n}", n + 1
        names.append(candidate)
    return names
