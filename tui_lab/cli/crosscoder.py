"""`tfx-lab crosscoder train|features`: one dictionary over a hook at two snapshots or two models.

    crosscoder train (--run R [--steps A,B] | --model A --model B) [--hook H] [--text FILE]
                     [--d-sae N] [--l1 C] [--train-steps N] [--batch B] [--lr LR] [--tokens N]
                     --out DIR [--json]
    crosscoder features DIR [--feature I] [--top N] [--text FILE] [--tokens N] [--json]

Every source reads the same tokens (the text, else the first source's own text or
task). ``features`` lists the features new at the last source (B), gone at it and
shared, with the histogram of the relative decoder norm; ``--feature I`` shows
that feature's top contexts at every source.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from .shared import Subparsers, add_device, add_json, emit_json

if TYPE_CHECKING:
    from tui_lab.core.verbs.crosscoder_features import CrosscoderCard

HIST_WIDTH = 40


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("crosscoder", help="crosscoders: features that appear, vanish or stay between two snapshots or models")
    actions = s.add_subparsers(dest="crosscoder_action", metavar="ACTION", required=True)
    t = actions.add_parser("train", help="train a crosscoder on one hook at two or more sources")
    t.add_argument("--run", help="run folder: two of its history snapshots (see --steps)")
    t.add_argument("--steps", type=_steps, default=None, metavar="A,B",
                   help="snapshot steps of --run (default: the first at or after a tenth of the last, and the last)")
    t.add_argument("--model", action="append", default=[], metavar="SOURCE",
                   help="a source (a model folder, a cached hub name, or a run folder such as a fine-tune's); twice or more")
    t.add_argument("--hook", default=None, help="hook point (default: the residual stream after the last block)")
    t.add_argument("--text", default=None, help="text file to read activations from (default: the model's own)")
    t.add_argument("--d-sae", type=int, default=256, help="features (default 256)")
    t.add_argument("--l1", type=float, default=2.0, help="sparsity coefficient λ (default 2)")
    t.add_argument("--train-steps", type=int, default=2000, help="optimizer steps (default 2000)")
    t.add_argument("--batch", type=int, default=256, help="rows per step (default 256)")
    t.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    t.add_argument("--tokens", type=int, default=40_000, help="activation rows collected at each source (default 40000)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", required=True, help="folder to write (cfg.json, crosscoder_weights.safetensors)")
    add_device(t)
    add_json(t, "print a JSON summary (and no progress)")
    t.set_defaults(handler=train)
    f = actions.add_parser("features", help="features new at B, gone, shared; or one feature's contexts at each source")
    f.add_argument("dir", metavar="DIR", help="the crosscoder's folder")
    f.add_argument("--feature", type=int, default=None, help="one feature: its top contexts at every source")
    f.add_argument("--top", type=int, default=10, help="features of each kind, or contexts, to show (default 10)")
    f.add_argument("--text", default=None, help="text file for the contexts (default: the model's own)")
    f.add_argument("--tokens", type=int, default=10_000, help="rows read for the contexts (default 10000)")
    add_device(f)
    add_json(f)
    f.set_defaults(handler=features)


def _steps(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: steps such as 200,2000") from None


class Said:
    """Progress as a line every two seconds on stderr; nothing with --json."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.last = quiet, 0.0

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.quiet and (time.monotonic() - self.last >= 2.0 or done == total):
            self.last = time.monotonic()
            print(f"{what} {done:,}/{total:,}", file=sys.stderr, flush=True)


def train(args: argparse.Namespace) -> int:
    """Train a crosscoder and print where it is and its features' classes."""
    from tui_lab.core.model.device import set_threads
    from tui_lab.core.verbs.crosscoder_train import Request, run

    request = Request(args.out, args.run, args.steps, tuple(args.model), args.hook, args.text, args.d_sae,
                      args.l1, args.train_steps, args.batch, args.lr, args.tokens, args.seed, args.device)
    set_threads(0)
    result = run(request, progress=Said(args.json))
    if args.json:
        emit_json(result.to_json())
        return 0
    print(f"crosscoder in {result.out}: {result.hook} at {' and '.join(result.sources)}, "
          f"{result.step} steps in {result.seconds:.1f} s")
    print(f"  explained variance {result.last.get('explained_variance', float('nan')):.3f}  "
          f"L0 {result.last.get('l0', float('nan')):.1f}")
    _print_summary(result.summary, result.sources)
    return 0


def _print_summary(summary: dict[str, object], sources: list[str]) -> None:
    from tui_lab.core.sae.crosscoder_norms import TITLES, Histogram, histogram_lines

    counts = summary["counts"]
    assert isinstance(counts, dict)
    print("  " + "  ".join(f"{TITLES[k]} {v}" for k, v in counts.items()))
    hist = summary["histogram"]
    assert isinstance(hist, list)
    edges = [b["low"] for b in hist] + [hist[-1]["high"]] if hist else [0.0]
    shape = Histogram(edges, [b["count"] for b in hist])
    print(f"  relative decoder norm ||d_B|| / (||d_A|| + ||d_B||), A = {sources[0]}, B = {sources[-1]}:")
    for line in histogram_lines(shape, HIST_WIDTH):
        print("    " + line)


def features(args: argparse.Namespace) -> int:
    """The lists, or one feature's contexts at every source."""
    from tui_lab.core.model.device import set_threads
    from tui_lab.core.sae.crosscoder_norms import TITLES
    from tui_lab.core.verbs.crosscoder_features import Request, run

    request = Request(args.dir, args.feature, args.top, args.text, args.tokens, args.device)
    set_threads(0)
    result = run(request, progress=Said(args.json))
    if args.json:
        emit_json(result.to_json())
        return 0
    print(f"{args.dir}: {result.hook} at {' and '.join(result.sources)}")
    if result.card is not None:
        _print_card(result.card)
        return 0
    _print_summary(result.summary, result.sources)
    if any(rows for kind, rows in (result.lists or {}).items() if kind != "dead"):
        print("  (r: relative decoder norm; fired: the rows, of those training saw last, it fired on)")
    for kind, rows in (result.lists or {}).items():
        if kind == "dead" or not rows:
            continue
        print(f"  {TITLES[kind]}:")
        for r in rows:
            norms = " ".join(f"{v:.3f}" for v in r["norms"])
            print(f"    feature {r['index']:>5}  r {r['relative_norm']:.3f}  norms {norms}  fired {r['fired']}")
    return 0


def _print_card(card: CrosscoderCard) -> None:
    from tui_lab.cli.sae import context_lines
    from tui_lab.core.sae.crosscoder_norms import TITLES

    print(f"feature {card['feature']}: {TITLES[card['kind']]}, relative norm {card['relative_norm']:.3f}, "
          f"decoder norms {card['norms']}, fires on {card['density']:.2%} of {card['tokens']:,} tokens")
    for src in card["sources"]:
        print(f"  at {src['source']} (read alone): density {src['density']:.2%}, max {src['max_activation']:.3f}")
        for c in src["contexts"]:
            text, under = context_lines(c["tokens"], c["shade"], c["peak_at"])
            print(f"    {c['peak']:8.3f}  {text}")
            print(f"    {'':8}  {under}")
