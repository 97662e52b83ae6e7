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
    check_examples,
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
    check_examples(args.n)
    from tui_lab.core.runs.log import read_metrics
    from tui_lab.core.training.evaluate import evaluate as evaluate_model
    from tui_lab.core.training.evaluate import held_out_pairs

    run = load_target(args, args.device, args.at_step)
    pairs = None if run.task.is_lm else held_out_pairs(run.task, run.config.train, args.n)
    ev = evaluate_model(run.model, run.task, run.config, run.device, step=run.step, pairs=pairs)
    seen = [m.get("overlap") for m in read_metrics(args.run) if m.get("kind") == "eval"]
    result = {
        "exact_match": ev.exact_match,
        "bits_per_char": ev.bits_per_char,
        "next_char_accuracy": ev.next_char_accuracy,
        "val_loss": ev.val_loss,
        "n": ev.n,
        "step": run.step,
        "preset": run.config.name,
        "task": run.config.task.name,
        # From the run's own last evaluation (its held-out set vs the examples it trained on).
        "held_out_seen_in_training": seen[-1] if seen else None,
    }
    if args.json:
        emit_json(result)
        return 0
    em = "n/a (language model)" if ev.exact_match is None else f"{ev.exact_match:.2%}"
    if ev.bits_per_char is not None and ev.next_char_accuracy is not None:
        unit = "token" if run.config.task.name == "token-lm" else "char"  # a tokenizer's pieces
        em = (f"n/a; {ev.bits_per_char:.3f} bits/{unit}, next-{unit} accuracy "
              f"{ev.next_char_accuracy:.2%}")
    print(f"{args.run}: step {run.step}, exact match {em} on {ev.n} held-out, "
          f"val loss {ev.val_loss:.4f}")
    return 0
