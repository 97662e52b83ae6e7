"""`tfx-lab steer (--run DIR | --model SOURCE) --input TEXT --hook NAME --positive FILE
--negative FILE --coef C`: a steering vector from two prompt sets, the continuation with it
beside the plain one."""

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
    s = sub.add_parser("steer", help="steering: add a mean-difference vector at a hook while decoding")
    add_run_or_model(s)
    s.add_argument("--input", required=True, metavar="TEXT", help="the text to continue")
    s.add_argument("--hook", required=True, metavar="NAME", help="where to add it (blocks.1.hook_resid_pre)")
    s.add_argument("--positive", required=True, metavar="FILE", help="prompts to steer towards, one a line")
    s.add_argument("--negative", required=True, metavar="FILE", help="prompts to steer away from, one a line")
    s.add_argument("--coef", type=float, required=True, help="the vector's coefficient")
    s.add_argument("--max-new", type=int, default=20, metavar="N", help="tokens to generate (default 20)")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=steer)


def steer(args: argparse.Namespace) -> int:
    """Build the vector, decode plainly and steered, print both."""
    from tui_lab.core.analysis.patching.steering import read_prompts
    from tui_lab.core.verbs.steer import Request, Steering, run

    positive, negative = read_prompts(args.positive), read_prompts(args.negative)
    request = Request(args.input, Steering(args.hook, tuple(positive), tuple(negative), args.coef), args.max_new)
    result = run(request, load_target(args, "cpu", args.at_step)).steered
    which = "model" if args.model is not None else "run"
    if args.json:
        emit_json({which: target_name(args), **result.to_dict()})
        return 0
    print(f"{target_name(args)}: {args.hook} + {args.coef:g} x vector (norm {result.norm:.3f})")
    print(f"plain:   {args.input}|{result.plain}")
    print(f"steered: {args.input}|{result.steered}")
    return 0
