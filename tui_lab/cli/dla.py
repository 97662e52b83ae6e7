"""`tfx-lab dla (--run DIR | --model SOURCE) --input TEXT --answer TOK [--wrong TOK]`: direct
logit attribution of every head, MLP, the embeddings and the biases."""

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
    s = sub.add_parser("dla", help="direct logit attribution: each part's share of the answer's logit")
    add_run_or_model(s)
    s.add_argument("--input", required=True, metavar="TEXT", help="the text the model reads")
    s.add_argument("--answer", required=True, metavar="TOK", help="the next token to explain: one token")
    s.add_argument("--wrong", metavar="TOK", help="explain logit[answer] - logit[wrong] (one token)")
    s.add_argument("--target", metavar="TEXT",
                   help="an encoder-decoder's decoder input after its start token; the answer follows it")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=dla)


def dla(args: argparse.Namespace) -> int:
    """Each component's direct contribution at the last position, their total and the model's own."""
    from tui_lab.core.verbs.dla import Request, run

    request = Request(args.input, args.answer, args.wrong, args.target)
    result = run(request, load_target(args, "cpu", args.at_step)).attribution
    which = "model" if args.model is not None else "run"
    if args.json:
        emit_json({which: target_name(args), **result.to_dict()})
        return 0
    what = f"logit[{result.answer!r}]" + ("" if result.wrong is None else f" - logit[{result.wrong!r}]")
    print(f"{target_name(args)}: direct logit attribution of {what}")
    rows = [(str(c["name"]), float(c["value"])) for c in result.components]
    width = max(len(name) for name, _ in rows)
    top = max(abs(value) for _, value in rows) or 1.0
    for name, value in rows:
        bar = "#" * round(20 * abs(value) / top)
        print(f"{name:<{width}} {value:+9.3f} {'-' if value < 0 else '+'}{bar}")
    print(f"{'total':<{width}} {result.total:+9.3f}   (the model: {result.model:+.3f})")
    return 0
