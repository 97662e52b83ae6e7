"""``tfx-lab sweep``: a grid of runs over seeds, a live display, a table per arm and ``sweep.json``.

Parses the arguments into ``core.verbs.sweep``'s request and runs it; here are only
the live display, ctrl+c (stop and save every run) and the table per arm.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from .shared import Subparsers

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from rich.live import Live
    from rich.table import Table

    from tui_lab.core.sweeps.runner import SweepRunner


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("sweep", help="a grid of runs over seeds; writes sweep.json")
    s.add_argument("spec", nargs="?",
                   help="sweep YAML, or a shipped sweep's name: ln-warmup, positions, char-lm-tune, grokking")
    s.add_argument("--preset", help="preset name or YAML path to vary")
    s.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                   help="a setting and its values (repeat for a grid)")
    s.add_argument("--seeds", type=int, help="seeds per arm (default 1)")
    s.add_argument("--parallel", type=int, help="runs at once (default: one per core)")
    s.add_argument("--steps", type=int, help="override train.steps")
    s.add_argument("--max-seconds", type=float, help="override train.max_seconds")
    s.add_argument("--out", help="sweep folder (default for a SPEC: <runs>/<spec name>)")
    s.add_argument("--json", action="store_true", help="no progress; print sweep.json's content")
    s.set_defaults(handler=sweep)


def sweep(args: argparse.Namespace) -> int:
    """Plan, check, run (K at a time), then report per arm; ctrl+c stops and saves every run."""
    from tui_lab.core.verbs.sweep import Request, run

    request = Request(args.spec, args.preset, tuple(args.vary), args.seeds, args.parallel,
                      args.steps, args.max_seconds, args.out)
    interrupt = _Interrupt()
    try:
        if args.json:
            result = run(request, cancelled=interrupt)
        else:
            with _LiveDisplay() as live:
                result = run(request, progress=live.progress, cancelled=interrupt, watch=live.watch)
    finally:
        interrupt.restore()
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        from rich.console import Console

        Console().print(arm_table(result.document))
    if result.interrupted:
        print(f"tfx-lab: interrupted; {result.saved} run(s) stopped and saved; run the same command "
              f"again to resume", file=sys.stderr)
        return 130
    return 1 if result.failed else 0


class _Interrupt:
    """The verb's ``cancelled``: true once ctrl+c is pressed. The handler goes in at the
    first call (the verb asks once everything is checked and written and runs begin), so a
    ctrl+c while planning still ends the command at once."""

    def __init__(self) -> None:
        self.pressed = False
        self.previous: signal.Handlers | Callable[[int, FrameType | None], object] | int | None = None
        self.installed = False

    def __call__(self) -> bool:
        if not self.installed:
            self.previous = signal.signal(signal.SIGINT, self._press)
            self.installed = True
        return self.pressed

    def _press(self, signum: int, frame: FrameType | None) -> None:
        self.pressed = True

    def restore(self) -> None:
        if self.installed:
            signal.signal(signal.SIGINT, self.previous)


class _LiveDisplay:
    """The runs going on, on stderr while the sweep runs (gone when it ends), with a line
    for each run that ends; started at the verb's first word, after the sweep is checked."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.live: Live | None = None

    def __enter__(self) -> _LiveDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def progress(self, done: int, total: int, what: str) -> None:
        if done == 0:  # the complete runs the sweep skips, said before it starts any
            self.console.print(f"[dim]{what}[/dim]")
            return
        self._start(None)
        self.console.print(what)

    def watch(self, runner: SweepRunner) -> None:
        self._start(runner)
        if self.live is not None:
            self.live.update(_live_view(runner))

    def _start(self, runner: SweepRunner | None) -> None:
        if self.live is None:
            from rich.live import Live
            from rich.table import Table

            view = _live_view(runner) if runner is not None else Table(box=None)
            self.live = Live(view, console=self.console, refresh_per_second=4, transient=True)
            self.live.start()


def _live_view(runner: SweepRunner) -> Table:
    from rich.table import Table

    total = sum(1 for t in runner.tasks if t.action != "skip")
    finished = sum(1 for t in runner.tasks if t.action != "skip" and t.ended is not None)
    title = f"sweep: {finished}/{total} runs done, {len(runner.active)} running"
    if runner.stopping:
        title += " (stopping: each run saves)"
    view = Table(title=title, title_justify="left", box=None)
    for col in ("run", "step", "loss", "exact match", "s"):
        view.add_column(col, justify="left" if col == "run" else "right")
    now = time.time()
    for t in runner.active:
        view.add_row(t.name, f"{t.step}/{t.run.config.train.steps}",
                     "-" if t.loss is None else f"{t.loss:.3f}",
                     "-" if t.exact_match is None else f"{t.exact_match:.1%}",
                     f"{now - (t.started or now):.0f}")
    return view


def arm_table(document: dict[str, Any]) -> Table:
    """Per arm: seeds done, how many reached the target, steps and seconds to it, best metric."""
    from rich.table import Table

    from tui_lab.core.sweeps.stats import format_spread

    out = document.get("out", "")
    t = Table(title=f"Sweep {out} (preset {document.get('preset')})", title_justify="left")
    for col in ("arm", "done", "reached", "steps to target", "s to target", "best"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for row in document["table"]:
        lm = row["metric"] == "val_loss"
        best = format_spread(row["best"], "{:.3f}" if lm else "{:.1%}")
        if lm and row.get("bits_per_char"):
            best += f" [{format_spread(row['bits_per_char'], '{:.2f}')} bpc]"
        target = row["target"]
        t.add_row(row["arm"], f"{row['finished']}/{row['seeds']}",
                  f"{row['reached']}/{row['seeds']}" if target is not None else "n/a",
                  format_spread(row["steps_to_target"]), format_spread(row["seconds_to_target"], "{:.1f}"),
                  best)
    return t
