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
    import torch

    from tui_lab.core.opening.model_in_hand import hooked

    lab = hooked(load_target(args, "cpu", args.at_step))
    text = args.input if args.input is not None else _default_input(lab.task)
    with torch.no_grad():
        _, cache = lab.run_with_cache(text)
    tokens = lab.to_str_tokens(text)
    if args.json:
        emit_json({
            "model" if args.model is not None else "run": target_name(args),
            "input": text,
            "tokens": tokens,
            "hooks": [{"name": name, "shape": list(t.shape)} for name, t in cache.items()],
        })
        return 0
    print(f"{target_name(args)}: {len(cache)} hook points on {len(tokens)} tokens of {text!r}")
    width = max(len(name) for name in cache)
    for name, t in cache.items():
        print(f"{name:<{width}}  {tuple(t.shape)}")
    return 0


def _default_input(task: object) -> str:
    """One of the task's own examples (what the lab's Decode offers), else a plain phrase."""
    try:
        shown = task.examples_for_display(1)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a real model's text has no examples to offer
        shown = []
    return str(shown[0]) if shown else "Hello world"
