"""`tfx-lab hooks (--run DIR | --model SOURCE) [--input TEXT] [--json]`: every hook point of a
model with the shape of its activation on one input."""

from __future__ import annotations

import argparse

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_run_or_model,
    emit_json,
    load_target,
    target_name,
)


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("hooks", help="every hook point (blocks.0.hook_resid_pre, ...) with its shape")
    add_run_or_model(s)
    add_at_step(s)
    s.add_argument("--input", default=None, metavar="TEXT",
                   help="the text to run (default: one of the task's examples, or 'Hello world')")
    add_json(s)
    s.set_defaults(handler=hooks)


def hooks(args: argparse.Namespace) -> int:
    """Run the model once on the input with every hook point cached; print name and shape."""
    from tui_lab.core.verbs.hooks import Request, run

    result = run(Request(args.input), load_target(args, "cpu", args.at_step))
    if args.json:
        emit_json({"model" if args.model is not None else "run": target_name(args), **result.to_json()})
        return 0
    print(f"{target_name(args)}: {len(result.hooks)} hook points on {len(result.tokens)} tokens "
          f"of {result.input!r}")
    width = max(len(name) for name, _ in result.hooks)
    for name, shape in result.hooks:
        print(f"{name:<{width}}  {shape}")
    return 0
