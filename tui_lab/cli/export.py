"""``tfx-lab export``: runs in formats other tools read, one of two per call.

- ``--tensorboard RUN... [--out DIR]``: TensorBoard event files. Every run goes
  to its own folder under one ``--out`` (default ``./tensorboard``, next to the
  default ``./runs``), so ``tensorboard --logdir <out>`` shows them side by
  side. The writing is ``core.runs.tensorboard_export``'s.
- ``--hf RUN --out DIR [--at-step N]``: a Hugging Face folder that
  ``transformers`` (``AutoModelForCausalLM``, ``AutoTokenizer``) opens with no
  custom code, and the lab with ``--model DIR``. The writing is
  ``core.export.export_hf``'s; both through ``core.verbs.export``.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from tui_lab.core.errors import LabError

from .runs import expand_runs, short_names
from .shared import Subparsers, add_at_step, add_json, emit_json, print_error

DEFAULT_OUT = "tensorboard"


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("export", help="write runs in formats other tools read")
    s.add_argument("runs", nargs="+", metavar="RUN", help="run folders (a sweep folder: its runs); "
                   "--hf: one run")
    kind = s.add_mutually_exclusive_group(required=True)
    kind.add_argument("--tensorboard", action="store_true",
                      help="TensorBoard event files (needs: pip install 'tfx-lab[tensorboard]')")
    kind.add_argument("--hf", action="store_true",
                      help="a Hugging Face folder (config.json, model.safetensors, tokenizer) that "
                      "transformers and --model open")
    s.add_argument("--out", help="--tensorboard: one folder for all runs, a sub-folder per run "
                   f"(default: ./{DEFAULT_OUT}); --hf: the folder to write (must not exist)")
    add_at_step(s)
    add_json(s, "--hf: print what was written as JSON")
    s.set_defaults(handler=export)


def export(args: argparse.Namespace) -> int:
    """Export each run (a sweep folder: its runs); one line per run, then how to look."""
    if args.hf:
        return export_hf(args)
    if not args.tensorboard:
        raise LabError("say what to export to: --tensorboard or --hf")
    if args.at_step is not None or args.json:
        raise LabError("--at-step and --json go with --hf")
    from tui_lab.core.runs.tensorboard_export import summary_writer_class
    from tui_lab.core.verbs.export import TensorboardRequest, run_tensorboard

    summary_writer_class()  # a missing extra is one error, before any run is read
    folders = expand_runs(args.runs)
    out = Path(args.out) if args.out else Path(DEFAULT_OUT)
    result = run_tensorboard(TensorboardRequest(tuple(folders), tuple(unique_names(folders)), out))
    for exported in result.runs:
        if exported.error is not None:
            print_error(exported.error)
            continue
        written = exported.written
        assert written is not None  # an outcome holds one or the other
        again = "; replaced the earlier export" if written.replaced else ""
        print(f"{exported.name}: {written.points} points ({_count(written.steps, 'step')}, "
              f"{_count(written.evals, 'evaluation')}) -> {written.folder}{again}")
    if result.failed < len(result.runs):
        print(f"view them: tensorboard --logdir {shlex.quote(str(out))}")
    return 2 if result.failed else 0


def export_hf(args: argparse.Namespace) -> int:
    """One run as a Hugging Face folder; a line saying what was written and how to open it."""
    if len(args.runs) != 1:
        raise LabError(f"export --hf takes one run, got {len(args.runs)}")
    from tui_lab.core.verbs.export import Request, run

    result = run(Request(args.runs[0], args.out or "", args.at_step))
    if args.json:
        emit_json(result.to_json())
        return 0
    written = result.written
    where = shlex.quote(str(written.folder))
    print(f"{args.runs[0]} (step {written.step}) -> {written.folder}: {written.family}, "
          f"{written.n_params:,} parameters, {len(written.files)} files")
    print(f"open it: AutoModelForCausalLM.from_pretrained({str(written.folder)!r}), "
          f"or tfx-lab decode --model {where} --input TEXT")
    return 0


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
