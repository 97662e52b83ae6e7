"""`tfx-lab fourier --run DIR`: a modular-arithmetic run's embedding spectrum (or a snapshot's)."""

from __future__ import annotations

import argparse

from .shared import Subparsers, add_at_step, add_json, add_run, emit_json, load_target

BAR = 40  # characters of the strongest frequency's bar


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("fourier", help="modular-addition runs: the embedding's power per frequency")
    add_run(s)
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=fourier)


def fourier(args: argparse.Namespace) -> int:
    """Print the embedding's power per frequency, its key frequencies and its top-8 share."""
    from tui_lab.core.verbs.fourier import Request, run

    result = run(Request(), load_target(args, "cpu", args.at_step))
    spec = result.spectrum
    if args.json:  # the run's folder before the step, as the command always wrote it
        emit_json({**spec.to_dict(), "run": args.run, "step": result.step})
        return 0
    keys = ", ".join(map(str, spec.key_frequencies)) or "none yet"
    print(f"{args.run}: step {result.step}, p = {spec.p}; key frequencies {keys}; "
          f"top-8 share {spec.top8_share:.2f}")
    peak = max(spec.power) or 1.0
    for k, share in enumerate(spec.power):
        mark = " key" if k in spec.key_frequencies else ""
        print(f"{k:>4} {share:6.3f} {'#' * round(BAR * share / peak)}{mark}")
    return 0
