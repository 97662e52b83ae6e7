"""`tfx-lab train`: train a preset headless (or resume a run); writes a run folder."""

from __future__ import annotations

import argparse
import contextlib
import signal
from pathlib import Path
from typing import Any

from tui_lab.core.errors import LabError

from .shared import Subparsers, add_json, add_preset, emit_json

# How a run may end and still be a success (exit 0); "nan" and "error" exit 1.
GOOD_ENDS = ("finished", "target", "stopped", "time")


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("train", help="train a preset headless; writes a run folder")
    add_preset(s)
    s.add_argument("--steps", type=int, help="override train.steps")
    s.add_argument("--max-seconds", type=float, help="stop after this many seconds")
    s.add_argument("--out", help="run folder (default: <runs>/<preset>-<time>, "
                   "<runs> = $TFX_LAB_RUNS or ./runs)")
    s.add_argument("--device", help="auto, cpu, cuda or mps")
    s.add_argument("--seed", type=int, help="override train.seed")
    s.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    add_json(s, help="print a JSON summary line at the end")
    s.set_defaults(handler=train)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The config settings the command line changes."""
    overrides: dict[str, Any] = {}
    for flag, key in (("steps", "train.steps"), ("max_seconds", "train.max_seconds"),
                      ("seed", "train.seed"), ("device", "train.device")):
        value = getattr(args, flag)
        if value is not None:
            overrides[key] = value
    return overrides


def train(args: argparse.Namespace) -> int:
    """Train headless with a progress display; ctrl+c stops cleanly and saves."""
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.distributed import from_environment
    from tui_lab.core.training.train import TrainingRun, open_run

    from .progress import make_reporter

    main_rank = from_environment().is_main  # under torchrun, rank 0 alone talks and writes
    overrides = _overrides(args)
    reporter = make_reporter(json_mode=args.json or not main_rank)
    if args.resume:
        run = open_run(args.resume, overrides, on_event=reporter.on_event)
    else:
        cfg = load_preset(args.preset)
        if overrides:
            cfg = cfg.with_values(overrides)
        out = _new_run_folder(args.out, cfg.name) if main_rank else None
        try:
            run = TrainingRun(cfg, out, on_event=reporter.on_event)
        except BaseException:
            if out is not None and not args.out:  # the folder claimed for it is still empty
                with contextlib.suppress(OSError):
                    out.rmdir()
            raise
    reporter.start(run)

    interrupts = 0

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            raise KeyboardInterrupt
        run.stop()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        summary = reporter.finish(run.run())
    finally:
        # After a ctrl+c the run is saved and the command ends: a second, impatient
        # one must not land as a traceback in the interpreter's shutdown.
        signal.signal(signal.SIGINT, signal.SIG_IGN if interrupts else previous)
    if args.json and main_rank:
        emit_json(summary)
    return 0 if summary["reason"] in GOOD_ENDS else 1


def _new_run_folder(out: str | None, name: str) -> Path:
    """``--out`` (refused if it already holds a run), else a fresh folder under the runs root."""
    from tui_lab.core.runs.folder import new_run_dir
    from tui_lab.core.runs.layout import STATE_FILE

    if not out:
        return new_run_dir(None, name)
    if (Path(out) / STATE_FILE).exists():
        raise LabError(f"{out}: already holds a run; use --resume {out} or another --out")
    return Path(out)
