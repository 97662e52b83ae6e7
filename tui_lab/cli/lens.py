"""`tfx-lab lens (--run DIR | --model SOURCE) --input TEXT [--lens logit|tuned|jacobian]
[--lens-file DIR | [--text FILE] [--steps N] [--prompts N] [--out DIR]] [--json]`: every layer
of the input's greedy decode read through the logit, a tuned or a Jacobian lens."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_run_or_model,
    emit_json,
    load_target,
    target_name,
)

if TYPE_CHECKING:
    from tui_lab.core.verbs.lens import Request, Result

EPILOG = """\
a tuned or Jacobian lens is fitted on the run's own data (its task's batches, a char-lm
run's text) or on --text FILE (a model opened from files, with no data of its own: on
Python's help text unless --text is given), unless --lens-file opens one saved by --out.
Examples:
  tfx-lab lens --run R --input 'The ' --lens tuned --steps 300 --out R/lenses/tuned
  tfx-lab lens --run R --input 'The ' --lens tuned --lens-file R/lenses/tuned --json
"""


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("lens", help="each layer read through the logit, a tuned or a Jacobian lens",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_or_model(s)
    s.add_argument("--input", required=True, metavar="TEXT", help="the text whose greedy decode is read")
    s.add_argument("--lens", choices=("logit", "tuned", "jacobian"), default="logit",
                   help="logit (default): each layer as it is; tuned: an affine translator per layer; "
                        "jacobian: the average Jacobian from the layer to the last")
    s.add_argument("--lens-file", metavar="DIR", help="open a lens saved by --out (refused if fitted for another model)")
    s.add_argument("--text", metavar="FILE", help="fit on this text file instead of the run's data")
    s.add_argument("--steps", type=int, default=200, help="tuned lens: training steps (default 200)")
    s.add_argument("--prompts", type=int, default=32, help="Jacobian lens: prompts averaged (default 32)")
    s.add_argument("--out", metavar="DIR", help="save the fitted lens here (lens.safetensors + lens.json)")
    s.add_argument("--top", type=int, default=5, metavar="K", help="tokens per layer and step in --json (default 5)")
    s.add_argument("--max-new", type=int, help="most tokens to decode")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=lens)


def request(args: argparse.Namespace) -> Request:
    """The lens verb's request; LabError (one line) for a refused combination or number."""
    from tui_lab.core.verbs.lens import Request

    return Request(args.input, lens=args.lens, lens_file=args.lens_file, text=args.text, steps=args.steps,
                   prompts=args.prompts, out=args.out, top_k=args.top, max_new=args.max_new)


def lens(args: argparse.Namespace) -> int:
    """Fit or open the lens, read the decode through it, print the table or JSON."""
    from tui_lab.core.verbs.lens import run

    asked = request(args)  # refused before the model is opened
    model = load_target(args, "cpu", args.at_step)
    from tui_lab.core.model.device import set_threads

    # A small model's steps are too short for threads to split: one thread, as training does.
    set_threads(0, sum(p.numel() for p in model.model.parameters()))
    last = [0]

    def progress(done: int, total: int, what: str) -> None:
        if not args.json and total and (done == total or done - last[0] >= max(1, total // 10)):
            last[0] = done
            print(what, file=sys.stderr)

    result = run(asked, model, progress)
    if args.json:
        which = "model" if args.model is not None else "run"
        emit_json({which: target_name(args), **result.to_json()})
        return 0
    _print(result)
    return 0


def _print(result: Result) -> None:
    r = result.readout
    print(f"{r.kind} lens over the decode of {r.input!r} -> {r.output!r}")
    width = max(len(s) for s in r.table.layers)
    print(f"{'layer':<{width}}  {'KL':>7}  {'top-1':>5}  " + "  ".join(f"{t!r:>10}" for t in r.table.steps))
    for score, row in zip(r.scores, r.table.rows, strict=True):
        cells = "  ".join(f"{c.token!r:>6} {c.prob:.2f}"[-10:].rjust(10) for c in row)
        print(f"{score.layer:<{width}}  {score.kl:7.4f}  {score.agreement:5.0%}  {cells}")
    if result.fit is not None:
        f = result.fit
        loss = "" if not f.losses else f", loss {f.losses[0]:.4f} -> {f.losses[-1]:.4f}"
        print(f"\nfitted on {f.data} in {f.seconds:.1f} s ({f.done} {'steps' if r.kind == 'tuned' else 'prompts'}{loss})"
              + (f"; saved to {result.saved}" if result.saved else ""))
    if result.held_out is not None:
        print(f"on fresh batches: {'layer':<{width}}  KL {r.kind} vs logit, top-1 {r.kind} vs logit")
        for mine, logit in result.held_out:
            print(f"  {mine.layer:<{width}}  {mine.kl:.4f} vs {logit.kl:.4f}   {mine.agreement:.0%} vs {logit.agreement:.0%}")
