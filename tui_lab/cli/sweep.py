"""``tfx-lab sweep``: a grid of runs over seeds, a live display, a table per arm and ``sweep.json``.

Everything is checked before anything starts: the spec, every arm's config,
and what the output folder already holds (a rerun resumes it). The processes
are ``core.sweeps.runner``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_lab.core.errors import LabError

from .shared import Subparsers

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.table import Table

    from tui_lab.core.sweeps.runner import RunTask, SweepRunner
    from tui_lab.core.sweeps.spec import SweepPlan, SweepSpec

# Fields that may change between a sweep and its resumption (they do not change what is trained).
_RESUMABLE_CHANGES = ("parallel", "out", "description")


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


def build_spec(args: argparse.Namespace) -> tuple[SweepSpec, Path]:
    """The spec from SPEC (a file or shipped name), from --preset/--vary, or from --out's
    ``sweep.json`` (resuming); command-line fields win over the file's."""
    from tui_lab.core.runs.folder import runs_root
    from tui_lab.core.sweeps.record import SWEEP_FILE, read_sweep
    from tui_lab.core.sweeps.spec import load_sweep_spec, parse_vary, spec_from_dict

    fields: dict[str, object] = {}
    default_out: Path | None = None
    if args.spec:
        if args.vary:
            raise LabError("give a SPEC or --vary, not both (a spec lists what it varies)")
        fields = load_sweep_spec(args.spec).to_dict()
        default_out = runs_root() / Path(args.spec).stem
    elif args.vary or args.preset:
        fields = {"preset": args.preset, "vary": parse_vary(args.vary)}
    elif args.out and (Path(args.out) / SWEEP_FILE).is_file():
        fields = dict((read_sweep(args.out) or {}).get("spec") or {})
    else:
        raise LabError("say what to sweep: SPEC.yaml, a shipped sweep (ln-warmup), "
                       "or --preset P --vary KEY=A,B")
    if args.preset and args.spec:
        fields["preset"] = args.preset
    for key in ("seeds", "parallel", "steps", "max_seconds", "out"):
        value = getattr(args, key)
        if value is not None:
            fields[key] = value
    spec = spec_from_dict(fields)
    out = Path(spec.out) if spec.out else default_out
    if out is None:
        raise LabError("--out DIR: say where the sweep's run folders go")
    return spec, out


def _check_same_sweep(spec: SweepSpec, out: Path) -> None:
    """A folder holding another sweep is refused: its runs would be mixed with these."""
    from tui_lab.core.sweeps.record import read_sweep

    old = read_sweep(out)
    if not old or not isinstance(old.get("spec"), dict):
        return
    new = spec.to_dict()
    differ = [k for k in new if k not in _RESUMABLE_CHANGES and old["spec"].get(k) != new[k]]
    if differ:
        raise LabError(f"{out}: holds another sweep (its {', '.join(differ)} differ); "
                       "use another --out")


def sweep(args: argparse.Namespace) -> int:
    """Plan, check, run (K at a time), then report per arm; ctrl+c stops and saves every run."""
    from tui_lab.core.runs.atomic import atomic_write_text
    from tui_lab.core.runs.summary import SWEEP_BASE
    from tui_lab.core.sweeps.record import sweep_document, write_sweep
    from tui_lab.core.sweeps.runner import SweepRunner, cpu_slots
    from tui_lab.core.sweeps.spec import plan_sweep

    spec, out = build_spec(args)
    parallel = spec.parallel or max(1, len(_cpus()))
    slots, share = cpu_slots(parallel)
    plan = plan_sweep(spec, out, max_threads=share, pinned=slots is not None)
    _check_same_sweep(spec, out)
    runner = SweepRunner(plan, parallel, slots)
    runner.prepare()  # refuses a foreign or live folder, before anything is written
    out.mkdir(parents=True, exist_ok=True)
    base = out / SWEEP_BASE  # what the runs are compared with in tables and legends
    base.parent.mkdir(exist_ok=True)
    atomic_write_text(base, (plan.common or plan.base).to_yaml(full=True))
    outcomes: dict[str, dict[str, object]] = {t.name: t.outcome() for t in runner.tasks}
    write_sweep(out, sweep_document(plan, outcomes))

    previous = signal.signal(signal.SIGINT, lambda signum, frame: runner.stop())
    try:
        if args.json:
            _drive(runner, plan, outcomes, None)
        else:
            _drive_live(runner, plan, outcomes)
    except BaseException:
        runner.kill()
        raise
    finally:
        signal.signal(signal.SIGINT, previous)

    document = sweep_document(plan, outcomes, interrupted=runner.stopping)
    write_sweep(out, document)
    if args.json:
        print(json.dumps(document))
    else:
        from rich.console import Console

        Console().print(arm_table(document))
    if runner.stopping:
        saved = sum(1 for t in runner.tasks if t.reason == "stopped")
        print(f"tfx-lab: interrupted; {saved} run(s) stopped and saved; run the same command "
              f"again to resume", file=sys.stderr)
        return 130
    failed = [t for t in runner.tasks if t.reason in ("error", "nan")]
    return 1 if failed else 0


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def _drive(runner: SweepRunner, plan: SweepPlan, outcomes: dict[str, dict[str, object]],
           on_change: Callable[[RunTask | None], None] | None, interval: float = 0.25) -> None:
    """Poll until every run has ended; rewrite sweep.json after each that does."""
    from tui_lab.core.sweeps.record import sweep_document, write_sweep

    while True:
        ended = runner.poll()
        for task in ended:
            outcomes[task.name] = task.outcome()
            if on_change:
                on_change(task)
        if ended:
            write_sweep(plan.out, sweep_document(plan, outcomes))
        if runner.done:
            return
        if on_change:
            on_change(None)
        time.sleep(interval)


def _drive_live(runner: SweepRunner, plan: SweepPlan, outcomes: dict[str, dict[str, object]]) -> None:
    from rich.console import Console
    from rich.live import Live

    console = Console(stderr=True)
    skipped = [t.name for t in runner.tasks if t.action == "skip"]
    if skipped:
        console.print(f"[dim]skipping {len(skipped)} complete run(s): {', '.join(skipped)}[/dim]")
    with Live(_live_view(runner), console=console, refresh_per_second=4, transient=True) as live:

        def on_change(task: RunTask | None) -> None:
            if task is not None:
                secs = outcomes[task.name]["seconds"]
                console.print(f"{task.name}: {task.reason} at step {task.step}"
                              f"{f' ({secs:.1f} s)' if secs else ''}: {task.message}")
            live.update(_live_view(runner))

        _drive(runner, plan, outcomes, on_change)


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
