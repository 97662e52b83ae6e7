"""`tfx-lab trace (--run DIR | --model SOURCE) --input TEXT --subject TEXT --answer TOK`: ROME's
causal tracing, the answer's probability with each (token, layer) restored."""

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
    s = sub.add_parser("trace", help="causal tracing (ROME): where the subject's information is kept")
    add_run_or_model(s)
    s.add_argument("--input", required=True, metavar="TEXT", help="the text the model reads")
    s.add_argument("--subject", required=True, metavar="TEXT", help="the part of the input to corrupt")
    s.add_argument("--answer", required=True, metavar="TOK",
                   help="the next token (an encoder-only model's: at the input's one mask): one token")
    s.add_argument("--target", metavar="TEXT",
                   help="an encoder-decoder's decoder input after its start token; the answer follows it")
    s.add_argument("--noise", type=float, default=3.0, help="noise scale, times the embeddings' std (default 3)")
    s.add_argument("--samples", type=int, default=10, help="noise samples (default 10)")
    s.add_argument("--seed", type=int, default=0, help="the noise's seed (default 0)")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=trace)


def trace(args: argparse.Namespace) -> int:
    """Restore each state in turn; print tokens x layers as a fraction of the clean probability."""
    from tui_lab.core.verbs.trace import Request, run

    request = Request(args.input, args.subject, args.answer, args.target, noise=args.noise,
                      samples=args.samples, seed=args.seed)
    traced = run(request, load_target(args, "cpu", args.at_step))
    result, span = traced.trace, traced.span
    which = "model" if args.model is not None else "run"
    if args.json:
        emit_json({which: target_name(args), **traced.to_json()})
        return 0
    print(f"{target_name(args)}: p({result.answer!r}) clean {result.clean:.3f}, subject noised "
          f"{result.corrupt:.3f}; restored, as a fraction of clean")
    from .patch import print_grid

    for kind, values in result.values.items():
        print(f"-- {kind}")
        rows = [f"{i}{'*' if span[0] <= i < span[1] else ' '}{t}" for i, t in enumerate(result.tokens)]
        print_grid(rows, result.layers, values)
    return 0
