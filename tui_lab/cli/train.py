"""`tfx-lab train`: train a preset headless, fine-tune a real model on a text (--model SOURCE
--text FILE), or resume a run; writes a run folder."""

from __future__ import annotations

import argparse
import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.errors import LabError

from .shared import MODEL_HELP, Subparsers, add_json, emit_json

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from tui_lab.core.runs.events import Event
    from tui_lab.core.training.train import TrainingRun

# How a run may end and still be a success (exit 0); "nan" and "error" exit 1.
GOOD_ENDS = ("finished", "target", "stopped", "time")


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("train", help="train a preset headless, or fine-tune a real model on a "
                       "text; writes a run folder")
    which = s.add_mutually_exclusive_group()
    which.add_argument("--preset", default=None, help="preset name or YAML path (default: copy)")
    which.add_argument("--model", metavar="SOURCE", help="fine-tune a real model on --text FILE "
                       f"({MODEL_HELP}); on a CPU this is for small models (TinyStories-1M, "
                       "pythia-14m): one too large for this machine's memory is refused")
    s.add_argument("--revision", help="with --model: a branch or commit of the cached model")
    s.add_argument("--text", metavar="FILE", help="with --model: the text to fine-tune on "
                   "(its last tenth validates)")
    s.add_argument("--block", type=int, metavar="N", help="with --model: tokens per training window "
                   "(default: 128, or the model's context if shorter)")
    s.add_argument("--steps", type=int, help="override train.steps")
    s.add_argument("--max-seconds", type=float, help="stop after this many seconds")
    s.add_argument("--out", help="run folder (default: <runs>/<preset>-<time>, "
                   "<runs> = $TFX_LAB_RUNS or ./runs)")
    s.add_argument("--device", help="auto, cpu, cuda or mps")
    s.add_argument("--seed", type=int, help="override train.seed")
    s.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    add_json(s, help="print a JSON summary line at the end")
    s.set_defaults(handler=train)


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    """The config settings the command line changes."""
    overrides: dict[str, object] = {}
    for flag, key in (("steps", "train.steps"), ("max_seconds", "train.max_seconds"),
                      ("seed", "train.seed"), ("device", "train.device")):
        value = getattr(args, flag)
        if value is not None:
            overrides[key] = value
    return overrides


def train(args: argparse.Namespace) -> int:
    """Train headless with a progress display; ctrl+c stops cleanly and saves."""
    from tui_lab.core.config.lab_config import check_fits_in_memory
    from tui_lab.core.config.presets import load_preset

    # A preset that does not load, or whose model could never fit (counted without its
    # vocabulary; the model's build checks again with it), is refused before torch is
    # imported: seconds of a core.
    cfg = load_preset(args.preset) if not args.resume and args.model is None else None
    if cfg is not None:
        check_fits_in_memory(cfg.model)

    from tui_lab.core.training.distributed import from_environment
    from tui_lab.core.training.train import TrainingRun, open_run

    from .progress import make_reporter

    main_rank = from_environment().is_main  # under torchrun, rank 0 alone talks and writes
    overrides = _overrides(args)
    reporter = make_reporter(json_mode=args.json or not main_rank)
    _check_model_flags(args)
    if args.resume:
        run = open_run(args.resume, overrides, on_event=reporter.on_event)
    elif args.model is not None:
        run = _finetune_run(args, overrides, reporter.on_event, main_rank)
    else:
        assert cfg is not None
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

    def on_sigint(signum: int, frame: FrameType | None) -> None:
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


def _check_model_flags(args: argparse.Namespace) -> None:
    """--text, --block and --revision go with --model, and --model with a new run."""
    if args.model is None:
        for flag in ("text", "block", "revision"):
            if getattr(args, flag) is not None:
                raise LabError(f"--{flag} goes with --model SOURCE (fine-tuning a real model)")
        return
    if args.resume:
        raise LabError("--resume continues a run from its folder; leave out --model")
    if args.text is None:
        raise LabError("--model fine-tunes on a text: give --text FILE")
    if args.block is not None and args.block <= 0:
        raise LabError(f"--block: must be > 0, got {args.block}")


def _finetune_run(args: argparse.Namespace, overrides: dict[str, object], on_event: Callable[[Event], None],
                  main_rank: bool) -> TrainingRun:
    """A run that fine-tunes ``--model`` on ``--text`` (into a fresh folder, as a preset's)."""
    from tui_lab.core.training.finetune import open_finetune, run_name

    out = _new_run_folder(args.out, run_name(args.model)) if main_rank else None
    try:
        return open_finetune(args.model, args.text, out, overrides=overrides, block=args.block,
                             revision=args.revision, on_event=on_event)
    except BaseException:
        if out is not None and not args.out:  # the folder claimed for it is still empty
            with contextlib.suppress(OSError):
                out.rmdir()
        raise


def _new_run_folder(out: str | None, name: str) -> Path:
    """``--out`` (refused if it already holds a run), else a fresh folder under the runs root."""
    from tui_lab.core.runs.folder import new_run_dir
    from tui_lab.core.runs.run_files import STATE_FILE

    if not out:
        return new_run_dir(None, name)
    if (Path(out) / STATE_FILE).exists():
        raise LabError(f"{out}: already holds a run; use --resume {out} or another --out")
    return Path(out)
