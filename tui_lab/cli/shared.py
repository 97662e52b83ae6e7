"""What the commands share: their common options, JSON output, notes and the one-line error.

Nothing here imports torch, rich or textual at module level: every command's
parser is built from these on each start, `tfx-lab presets` included.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tui_lab.core.opening.model_in_hand import ModelInHand

# What ``add_subparsers`` returns (argparse keeps the class private); every command
# module's ``add_parser`` takes one.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

PROG = "tfx-lab"


def add_json(s: argparse.ArgumentParser, help: str = "print JSON") -> None:
    s.add_argument("--json", action="store_true", help=help)


def add_run(s: argparse.ArgumentParser) -> None:
    s.add_argument("--run", required=True, help="run folder")


MODEL_HELP = ("a real model, offline: a folder holding config.json and *.safetensors, or a hub "
              "name (gpt2, EleutherAI/pythia-14m) already in the local Hugging Face cache")


def add_model(s: argparse.ArgumentParser, group: Any = None) -> None:
    """``--model SOURCE``, ``--revision`` and ``--dtype`` (``--model`` on ``group`` when given:
    exclusive with --run or --preset)."""
    (group or s).add_argument("--model", metavar="SOURCE", help=MODEL_HELP)
    s.add_argument("--revision", help="with --model: a branch or commit of the cached model")
    s.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="with --model: compute in float32 (default, exact) or bfloat16 (the weights as stored)")


def add_run_or_model(s: argparse.ArgumentParser) -> None:
    """``--run DIR`` or ``--model SOURCE``, exactly one."""
    group = s.add_mutually_exclusive_group(required=True)
    group.add_argument("--run", help="run folder")
    add_model(s, group)


def add_pair(s: argparse.ArgumentParser) -> None:
    """A clean and a corrupted input and their two answers (patching's and edge attribution's pair)."""
    s.add_argument("--clean", metavar="TEXT", help="the clean input (the model gives --answer)")
    s.add_argument("--corrupt", metavar="TEXT", help="the corrupted input, as many tokens as --clean")
    s.add_argument("--answer", metavar="TOK", help="the clean run's answer: one token")
    s.add_argument("--wrong", metavar="TOK", help="the answer the corruption leads to: one token")


def add_at_step(s: argparse.ArgumentParser) -> None:
    s.add_argument("--at-step", type=int, metavar="N", help="use the history snapshot of step N")


def add_device(s: argparse.ArgumentParser) -> None:
    s.add_argument("--device", default="cpu", help="device (default cpu)")


def add_examples(s: argparse.ArgumentParser) -> None:
    s.add_argument("--n", type=int, default=500, help="held-out examples (default 500)")


def check_examples(n: int) -> None:
    """``--n`` must be positive (held-out examples to measure on)."""
    from tui_lab.core.errors import LabError

    if n <= 0:
        raise LabError(f"--n: must be > 0, got {n}")


def emit_json(obj: object) -> None:
    """One JSON document on one line of stdout."""
    print(json.dumps(obj))


def say_notes(notes: Iterable[str]) -> None:
    """Notes about what was loaded or decoded, on stderr (stdout stays the result)."""
    for note in notes:
        print(f"note: {note}", file=sys.stderr)


def print_error(exc: BaseException) -> None:
    """The one line a user mistake prints on stderr."""
    print(f"{PROG}: error: {exc}", file=sys.stderr)


def console() -> Any:
    """A rich console on stdout (rich is imported only by the commands that draw tables)."""
    from rich.console import Console

    return Console()


def load_target(args: argparse.Namespace, device: str = "cpu", at_step: int | None = None) -> ModelInHand:
    """The model a command works on: ``--run`` (at ``at_step``, its history snapshot) or
    ``--model`` with ``--revision`` and ``--dtype``, through ``open_model``; the notes
    opening it made go to stderr (stdout stays the result)."""
    from tui_lab.core.errors import LabError
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.runs.folder import RunFolder

    source = getattr(args, "model", None)  # commands that take only --run have no --model
    if source is None:
        if getattr(args, "revision", None):
            raise LabError("--revision goes with --model")
        # Read first, so a folder that is not a run is refused as a run, not as model files.
        lab = open_model(RunFolder.read(args.run), at_step=at_step, device=device)
    elif at_step is not None:
        raise LabError("--at-step reads a run's history; a model opened with --model has none")
    else:
        lab = open_model(source, revision=args.revision, dtype=getattr(args, "dtype", "float32"), device=device)
    say_notes(lab.notes)
    return lab


def target_name(args: argparse.Namespace) -> str:
    """What the command works on, as the user named it (a run folder or a model)."""
    return str(args.model if getattr(args, "model", None) is not None else args.run)
