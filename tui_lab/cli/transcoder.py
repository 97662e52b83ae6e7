"""`tfx-lab transcoder train|eval`: per-layer transcoders (an MLP's input to its output) in
circuit-tracer's or SAELens's files.

    transcoder train (--run R | --model S) [--layers all|0,1] [--architecture relu|topk|jumprelu]
                     [--skip] [--features N] [--k K] [--sparsity C] [--tokens N] [--text FILE]
                     [--at-step N | --history A,B,C] [--format circuit-tracer|saelens] --out DIR [--json]
    transcoder eval DIR (--run R | --model S) [--text FILE] [--tokens N] [--json]

Pairs come from the text (``--text``, else the run's own text, else its task's
sequences: induction's repeated prefixes), through the model, every layer at once.
``--history`` writes one set per snapshot under DIR/step_<N>/.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from tui_lab.core.errors import LabError

from .shared import Subparsers, add_device, add_json, add_run_or_model, emit_json, target_name

if TYPE_CHECKING:
    from tui_lab.core.sae.transcoder_metrics import TranscoderMetrics


def add_parser(sub: Subparsers) -> None:
    from tui_lab.core.verbs import transcoder_train as T

    s = sub.add_parser("transcoder", help="per-layer transcoders (MLP input -> MLP output): train, evaluate")
    actions = s.add_subparsers(dest="transcoder_action", metavar="ACTION", required=True)
    t = actions.add_parser("train", help="train one transcoder per layer on a model's MLPs")
    add_run_or_model(t)
    t.add_argument("--layers", default="all", help="all, or layers such as 0,1 to renew in the set at --out")
    t.add_argument("--architecture", choices=T.ARCHITECTURES, default="relu", help="nonlinearity (default relu)")
    t.add_argument("--skip", action="store_true", help="add a linear skip connection (W_skip)")
    t.add_argument("--features", type=int, default=None,
                   help=f"features per layer (default {T.FEATURES_PER_DIM} x d_model)")
    t.add_argument("--k", type=int, default=T.K, help=f"topk: features per token (default {T.K})")
    t.add_argument("--sparsity", type=float, default=None,
                   help=f"relu: L1 coefficient (default {T.L1:g}); jumprelu: L0 coefficient (default {T.L0:g})")
    t.add_argument("--tokens", type=int, default=T.TOKENS, help=f"training tokens (default {T.TOKENS})")
    t.add_argument("--batch", type=int, default=T.BATCH, help=f"rows per step (default {T.BATCH})")
    t.add_argument("--lr", type=float, default=T.LR, help=f"Adam learning rate (default {T.LR:g})")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--text", help="text file to read activations from (default: the run's text or task)")
    t.add_argument("--input-hook", default="ln2.hook_normalized",
                   help="where each transcoder reads, in a block (default ln2.hook_normalized: the MLP's input)")
    when = t.add_mutually_exclusive_group()
    when.add_argument("--at-step", type=int, metavar="N", help="train on the run's history snapshot of step N")
    when.add_argument("--history", metavar="A,B,C", help="one set per history step, under DIR/step_<N>/")
    t.add_argument("--format", choices=T.FORMATS, default="circuit-tracer", help="files (default circuit-tracer)")
    t.add_argument("--out", required=True, help="folder to write the set to")
    add_device(t)
    add_json(t, "print a JSON summary (and no progress)")
    t.set_defaults(handler=train)
    e = actions.add_parser("eval", help="explained variance, L0, dead fraction, CE loss recovered per layer and all")
    e.add_argument("dir", metavar="DIR", help="the set: circuit-tracer's folder or SAELens's per-layer folders")
    add_run_or_model(e)
    e.add_argument("--text", help="text file (its last tenth is held out; default: the run's text or task)")
    e.add_argument("--tokens", type=int, default=8_192, help="held-out tokens (default 8192)")
    add_device(e)
    add_json(e)
    e.set_defaults(handler=evaluate)


def _history(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise LabError(f"--history {text}: steps such as 0,200,1000") from None


def train(args: argparse.Namespace) -> int:
    """Train the set (or one per history step) and print its metrics."""
    from tui_lab.core.model.device import set_threads
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.verbs.transcoder_train import Request, parse_layers, run

    request = Request(args.out, parse_layers(args.layers), args.architecture, args.skip, args.features, args.k,
                      args.sparsity, args.tokens, args.batch, args.lr, args.seed, args.text, args.input_hook,
                      args.format, _history(args.history), args.at_step, device=args.device,
                      model_name=target_name(args))
    if request.history and args.run is None:
        raise LabError("--history needs a run with history (--run R)")
    source = args.model if args.model is not None else args.run
    handle = open_model(source, at_step=args.at_step, device=args.device)
    set_threads(0)  # passes over many tokens split well across cores (as sae train)
    said = [0.0]

    def progress(done: int, total: int, what: str) -> None:
        if not args.json and time.monotonic() - said[0] >= 2.0:
            said[0] = time.monotonic()
            print(f"{what}: {done:,}/{total:,} tokens", file=sys.stderr, flush=True)

    result = run(request, handle, progress,
                 open_at=lambda step: open_model(args.run, at_step=step, device=args.device))
    if args.json:
        emit_json(result.to_json())
        return 0
    for trained in result.sets:
        at = "" if trained.step is None else f" (step {trained.step})"
        print(f"{trained.out}{at}: {trained.steps} steps in {trained.seconds:.1f} s")
        _print_metrics(trained.metrics)
    return 0


def _print_metrics(metrics: TranscoderMetrics) -> None:
    """A row for the whole replacement, then one per layer."""
    print(f"  {'':<9} {'EV':>7} {'L0':>8} {'dead':>7} {'CE rec.':>8}")
    rows = [("all", metrics.whole)] + [(f"layer {i}", score) for i, score in enumerate(metrics.layers)]
    for name, score in rows:
        print(f"  {name:<9} {score.explained_variance:>7.3f} {score.l0:>8.1f} "
              f"{score.dead_fraction:>7.1%} {score.ce_loss_recovered:>8.3f}")


def evaluate(args: argparse.Namespace) -> int:
    """The set's metrics on held-out windows."""
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.verbs.transcoder_eval import Request, run

    request = Request(args.dir, args.text, args.tokens, device=args.device, model_name=target_name(args))
    result = run(request, open_model(args.model if args.model is not None else args.run, device=args.device))
    if args.json:
        emit_json(result.to_json())
        return 0
    print(f"{args.dir}: {result.feature_input_hook} -> {result.feature_output_hook}, "
          f"{result.metrics.tokens:,} held-out tokens")
    _print_metrics(result.metrics)
    return 0
