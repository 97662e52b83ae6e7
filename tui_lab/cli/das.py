"""`tfx-lab das --run DIR --variable NAME --layer L [--stack S] [--position P] [--rank K] [--history]`:
distributed alignment search, its interchange intervention accuracy and controls; over
a run's history, IIA by layer x step."""

from __future__ import annotations

import argparse

from .probe import print_grid
from .progress import CountLine
from .shared import Subparsers, add_at_step, add_json, add_run, emit_json, load_target


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("das", help="distributed alignment search: a subspace that carries a task variable")
    add_run(s)
    s.add_argument("--variable", required=True, metavar="NAME", help="a variable the run's task declares")
    s.add_argument("--layer", required=True, type=int, metavar="L",
                   help="the residual stream before block L (0: the embeddings; the last: after the last block)")
    s.add_argument("--position", metavar="P", help="a position class (column 1, element 2, ...; with --stack encoder: "
                   "'column 1 @ b digit 0'; default all)")
    s.add_argument("--rank", type=int, default=1, metavar="K", help="the subspace's dimensions (default 1)")
    s.add_argument("--stack", choices=("encoder", "decoder"),
                   help="an encoder-decoder's stream to read: encoder (each input position) or decoder "
                        "(default: where the variable is read)")
    s.add_argument("--examples", type=int, default=1000, metavar="N", help="task examples (default 1000)")
    s.add_argument("--steps", type=int, default=150, metavar="N", help="optimiser steps (default 150)")
    s.add_argument("--history", action="store_true", help="IIA at every layer of every history snapshot too")
    s.add_argument("--snapshots", type=int, default=10, metavar="N", help="with --history: at most N (default 10)")
    s.add_argument("--seed", type=int, default=0, help="examples, pairs and initial subspace (default 0)")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=das)


def das(args: argparse.Namespace) -> int:
    """IIA of the learnt subspace, the random-subspace and random-label controls, the whole swap."""
    from tui_lab.core.verbs.das import Request, run

    request = Request(args.variable, args.layer, args.position, args.rank, args.examples, steps=args.steps,
                      seed=args.seed, history=args.run if args.history else None, snapshots=args.snapshots,
                      stack=args.stack)
    counter = CountLine("das", enabled=not args.json)
    try:
        result = run(request, load_target(args, "cpu", args.at_step), lambda done, total, _w: counter(done, total))
    finally:
        counter.close()
    if args.json:
        emit_json({"run": args.run, **result.to_json()})
        return 0
    s = result.score
    print(f"{args.run}: DAS for {result.variable} at layer {result.layer} ({result.hook}), "
          f"position {result.position}, rank {result.rank}")
    print(f"interchange intervention accuracy {s.iia:.3f} on {s.n_test} held-out pairs ({s.n_train} to fit)")
    print(f"controls: random subspace {s.random_subspace:.3f}, random labels {s.random_labels:.3f}; "
          f"whole activation swapped {s.full_swap:.3f}")
    if result.history is not None:
        print_grid(result.history.readable)
        if result.history.causal is not None:
            print_grid(result.history.causal)
    return 0
