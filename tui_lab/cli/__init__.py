"""The `tfx-lab` command: the top parser, and the one place core and UI meet.

Each command's module owns its parser (``add_parser``) and its handler (set as
the subparser's ``handler`` default); this module only puts them together and
turns a user mistake into one line on stderr. Heavy imports (torch, textual,
rich) happen inside the handlers, so `tfx-lab presets` stays instant and the
lab paints before torch loads.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from tui_lab import __version__

from . import (
    ablate,
    basics,
    circuit,
    crosscoder,
    das,
    decode,
    dla,
    evaluate,
    export,
    fourier,
    graph,
    heads,
    hooks,
    lab,
    lens,
    params,
    patch,
    presets,
    probe,
    runs,
    sae,
    serve,
    steer,
    sweep,
    trace,
    train,
    transcoder,
)
from .shared import PROG, print_error

# In the order ``tfx-lab --help`` lists them (``lab`` adds ``watch``, ``runs`` adds ``compare``).
COMMANDS = (presets, params, train, evaluate, decode, heads, hooks, fourier, basics, lab, runs, sweep, ablate, patch, circuit, dla, lens, trace, steer, sae, transcoder, graph, crosscoder, serve, export, probe, das)


class UsageError(Exception):
    """A command line argparse refused (an unknown option, a value of the wrong type)."""


class OneLineParser(argparse.ArgumentParser):
    """A parser whose mistakes are one line, like every other refusal: argparse would
    print the usage lines first. Subparsers are made of the same class
    (``add_subparsers`` takes the parent's), so ``sae train`` and the rest are too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG,
        description="Build, train and look inside small Transformer models from a terminal.",
    )
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    lab.add_options(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print_error(exc)
        return 2
    from tui_lab.core.errors import LabError

    try:
        return args.handler(args) or 0
    except LabError as exc:
        print_error(exc)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
