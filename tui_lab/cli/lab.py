"""Opening the lab: `tfx-lab [--preset P | --run DIR | --model SOURCE] [--runs-dir DIR]` and `tfx-lab watch DIR`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui_lab.core.errors import LabError

from .shared import Subparsers

MODEL_HELP = (
    "open the lab on a real model, offline: a folder holding config.json and *.safetensors, "
    "or a hub name (gpt2, EleutherAI/pythia-14m) already in the local Hugging Face cache"
)


def add_options(p: argparse.ArgumentParser) -> None:
    """The top parser's own options: with no command, ``tfx-lab`` opens the lab."""
    what = p.add_mutually_exclusive_group()
    what.add_argument("--preset", help="preset name or YAML path for the lab (default: copy)")
    what.add_argument("--run", help="open the lab on an existing run folder")
    what.add_argument("--model", metavar="SOURCE", help=MODEL_HELP)
    p.add_argument("--revision", help="with --model: a branch or commit of the cached model")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="with --model: compute in float32 (default, exact) or bfloat16 (the weights as stored)")
    p.add_argument("--runs-dir", help="where the lab writes runs (default: ./runs)")
    p.set_defaults(handler=open_lab)


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("watch", help="open the lab following a run another process writes")
    s.add_argument("run", help="run folder")
    s.set_defaults(handler=watch)


def open_lab(args: argparse.Namespace) -> int:
    """Open the lab (the default command)."""
    from tui_lab.core.config.presets import load_preset

    if args.revision and not args.model:
        raise LabError("--revision goes with --model (a hub name in the local cache)")
    if args.model:
        _require_model(args.model, args.revision)
    elif args.run:
        _require_run_folder(args.run)
    else:
        load_preset(args.preset)  # a bad preset fails here with one line, before the UI starts
    from tui_lab.ui.app import run_lab

    run_lab(
        preset=args.preset,
        run_dir=args.run,
        runs_dir=args.runs_dir,
        model_source=args.model,
        revision=args.revision,
        dtype=args.dtype,
    )
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


def _require_model(source: str, revision: str | None) -> None:
    """What can be checked without torch, before the UI starts: the folder (or the cached
    snapshot) exists and holds a config.json. The weights are read once the lab is up."""
    from tui_lab.core.pretrained.errors import PretrainedError
    from tui_lab.core.pretrained.hf_files import CONFIG_FILE
    from tui_lab.core.pretrained.source import resolve_source

    found = resolve_source(source, revision)  # PretrainedError: one line
    if not (found.folder / CONFIG_FILE).is_file():
        raise PretrainedError(
            f"{source}: no {CONFIG_FILE} in {found.folder}; give the folder that "
            "save_pretrained (or hf download) wrote"
        )
