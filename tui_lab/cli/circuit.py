"""`tfx-lab circuit (--run DIR | --model SOURCE) (--pair NAME | --clean --corrupt --answer --wrong)`:
the circuit's edges (EAP, EAP-IG or exact edge patching), the faithfulness of its top k%
and MIB's CPR and CMD; ``--path`` patches one head pair exactly."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_pair,
    add_run_or_model,
    emit_json,
    load_target,
    target_name,
)

if TYPE_CHECKING:
    from tui_lab.core.verbs.circuit import Request, Result


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("circuit", help="edge attribution: which edges between components carry the answer")
    add_run_or_model(s)
    s.add_argument("--pair", metavar="NAME",
                   help="a ready-made pair: ioi (opened models), the run's task (induction, copy, ...); "
                        "an induction run's default is induction-key (only where the heads look moves)")
    add_pair(s)
    s.add_argument("--method", default="eap-ig",
                   help="eap (one backward), eap-ig (integrated gradients, default) or exact (one "
                        "patched forward per edge: slow)")
    s.add_argument("--ig-steps", type=int, default=5, metavar="N", help="eap-ig's points (default 5)")
    s.add_argument("--top", type=int, default=20, metavar="K", help="edges listed (default 20)")
    s.add_argument("--mean", type=int, default=0, metavar="N",
                   help="outside the circuit, each writer's mean over N held-out inputs (the induction pairs' "
                        "other seeds) instead of its corrupted value")
    s.add_argument("--path", metavar="EDGE",
                   help="also patch one head pair exactly, e.g. a0.h1->a1.h3<k> (the receiver's q, k or v)")
    s.add_argument("--check", action="store_true",
                   help="an induction run: also check the known circuit (previous-token heads into induction "
                        "heads' keys), its edges scored over 8 induction-key pairs")
    s.add_argument("--history", action="store_true",
                   help="a run with history: also the final circuit (its smallest top k%% that recovers 0.8) "
                        "measured at every snapshot")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=circuit)


def request_from_args(args: argparse.Namespace) -> Request:
    """The circuit request the options give (checked: refused in one line before any loading)."""
    from tui_lab.core.verbs.circuit import Request

    return Request(method=args.method, ig_steps=args.ig_steps, top=args.top, pair=args.pair, clean=args.clean,
                   corrupt=args.corrupt, answer=args.answer, wrong=args.wrong, path=args.path,
                   mean=args.mean, check=args.check, history=args.history)


def circuit(args: argparse.Namespace) -> int:
    """Score the edges, then print the top ones and the faithfulness curve."""
    from tui_lab.core.verbs.circuit import run

    request = request_from_args(args)
    result = run(request, load_target(args, "cpu", args.at_step))
    which = "model" if args.model is not None else "run"
    if args.json:
        emit_json({which: target_name(args), **result.to_json()})
        return 0
    print_result(target_name(args), result)
    return 0


def print_result(name: str, result: Result) -> None:
    """The top edges with bars, the faithfulness curve, CPR and CMD, and a path's patch."""
    s, f = result.scores, result.faithful
    print(f"{name}: {s.method} scores of {s.graph.n_edges} edges over the {result.pair.name} pair; "
          f"logit difference clean {s.clean:.3f}, corrupted {s.corrupt:.3f}")
    edges = s.top(result.top)
    width = max(len(e.name) for e in edges)
    biggest = max(abs(e.score) for e in edges) or 1.0
    for e in edges:
        print(f"{e.name:<{width}} {e.score:+9.4f} {'#' * round(20 * abs(e.score) / biggest)}")
    rest = "corrupted" if result.mean == 0 else f"their mean over {result.mean} held-out inputs"
    print(f"faithfulness (top k% of edges kept, the rest {rest}): recovered fraction")
    for p, r, n in zip(f.percents, f.recovered, f.kept, strict=True):
        print(f"  {p:>5g}% ({n:>5} edges) {r:+.3f}")
    print(f"CPR {f.cpr:.3f} (area under the curve, higher is better); CMD {f.cmd:.3f} (distance from 1)")
    if result.path is not None:
        pp = result.path
        print(f"path {pp.sender}->{pp.receiver}<{pp.which}>: logit difference {pp.patched:.3f}, "
              f"recovered {pp.recovered:+.3f}")
    if result.check is not None:
        print(result.check.line())
    if result.history is not None:
        h = result.history
        print(f"the final circuit (top {h.percent:g}%) over training: recovered fraction at each snapshot "
              "(* : the runs differ by under 5% of the final gap there: noise)")
        readable = set(h.readable()[0])
        for step, r in zip(h.steps, h.recovered, strict=True):
            print(f"  step {step:>7} {r:+.3f}{'' if step in readable else ' *'}")
