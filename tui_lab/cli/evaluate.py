"""`tfx-lab eval --run DIR [--n N]`: exact match and validation loss on held-out examples."""

from __future__ import annotations

import argparse

from .shared import (
    Subparsers,
    add_at_step,
    add_device,
    add_examples,
    add_json,
    add_run,
    emit_json,
    load_target,
)


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("eval", help="exact-match accuracy of a run on held-out examples")
    add_run(s)
    add_examples(s)
    add_device(s)
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=evaluate)


def evaluate(args: argparse.Namespace) -> int:
    """Exact match and validation loss of a run on held-out examples."""
    from tui_lab.core.verbs.evaluate import Request, run

    request = Request(args.n, args.run)  # a refused --n says so before the run is opened
    result = run(request, load_target(args, args.device, args.at_step))
    if args.json:
        emit_json(result.to_json())
        return 0
    ev = result.evaluation
    em = "n/a (language model)" if ev.exact_match is None else f"{ev.exact_match:.2%}"
    if ev.bits_per_char is not None and ev.next_char_accuracy is not None:
        unit = "token" if result.task == "token-lm" else "char"  # a tokenizer's pieces
        em = (f"n/a; {ev.bits_per_char:.3f} bits/{unit}, next-{unit} accuracy "
              f"{ev.next_char_accuracy:.2%}")
    print(f"{args.run}: step {result.step}, exact match {em} on {ev.n} held-out, "
          f"val loss {ev.val_loss:.4f}")
    return 0
