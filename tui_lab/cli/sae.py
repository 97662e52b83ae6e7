"""`tfx-lab sae train|eval|features`: sparse autoencoders on a model's hook, in SAELens's format.

    sae train (--run R | --model SOURCE) --hook NAME [--text FILE] --d-sae N
              --arch topk|relu|jumprelu|batchtopk|matryoshka [--k K] [--widths 64,256,1024]
              [--l1 C] [--tokens N] [--batch B] [--lr LR] --out DIR [--resume]
    sae eval DIR (--run | --model) [--text FILE] [--saebench OUT.json] [--json]
    sae features DIR (--run | --model) [--text FILE | --input TEXT] [--feature I] [--top N] [--sort density|max] [--json]

Activations come from the text (``--text``, else the run's own text: a char-lm
run's) through the model at the hook, window by window; the last tenth of the
text is held out for CE loss recovered and for ``eval``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from tui_lab.core.sae import defaults as DEFAULT
from tui_lab.core.verbs.sae_train import ARCHS

from .shared import Subparsers, add_device, add_json, add_run_or_model, emit_json, target_name

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress

    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.events import SAEEvent
    from tui_lab.core.verbs.sae_features import FeatureCard


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("sae", help="sparse autoencoders on a hook: train, evaluate, browse (SAELens's format)")
    actions = s.add_subparsers(dest="sae_action", metavar="ACTION", required=True)
    t = actions.add_parser("train", help="train an SAE on a model's activations at a hook")
    add_run_or_model(t)
    t.add_argument("--hook", required=True, help="hook point, such as blocks.1.hook_resid_post (tfx-lab hooks)")
    _add_text(t)
    t.add_argument("--d-sae", type=int, default=None, help="features (required unless --resume)")
    t.add_argument("--arch", choices=sorted(ARCHS), default="topk", help="architecture (default topk)")
    t.add_argument("--k", type=int, default=DEFAULT.K,
                   help=f"topk: features per token; batchtopk, matryoshka: per token on average over a batch, "
                        f"after a first half of training at exactly k per token (default {DEFAULT.K})")
    t.add_argument("--widths", type=_widths, default=None, metavar="W1,W2,...",
                   help="matryoshka: nested prefix sizes, the last --d-sae (default d_sae/16,d_sae/4,d_sae)")
    t.add_argument("--l1", type=float, default=None, help="relu: L1 coefficient; jumprelu: L0 coefficient")
    t.add_argument("--tokens", type=int, default=DEFAULT.TOKENS,
                   help=f"activation rows to train on (default {DEFAULT.TOKENS})")
    t.add_argument("--batch", type=int, default=DEFAULT.BATCH, help=f"rows per step (default {DEFAULT.BATCH})")
    t.add_argument("--lr", type=float, default=DEFAULT.LR, help=f"Adam learning rate (default {DEFAULT.LR:g})")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", required=True, help="folder to write (SAELens's files, metrics.jsonl, checkpoints)")
    t.add_argument("--resume", action="store_true", help="continue the training run in --out")
    add_device(t)
    add_json(t, "print a JSON summary (and no progress)")
    t.set_defaults(handler=train)
    e = actions.add_parser("eval", help="L0, MSE, explained variance, dead features, CE loss recovered")
    _add_sae_and_model(e)
    _add_text(e)
    e.add_argument("--tokens", type=int, default=50_000, help="held-out rows to measure on (default 50000)")
    e.add_argument("--saebench", metavar="OUT.json", default=None,
                   help="also write SAEBench's core evaluation (its JSON layout) to OUT.json")
    e.add_argument("--saebench-prompts", type=int, default=16, metavar="N",
                   help="SAEBench: held-out windows per batch (default 16)")
    e.add_argument("--saebench-batches", type=int, default=10, metavar="N",
                   help="SAEBench: batches scored for CE and KL (default 10; the first one for the rest)")
    add_json(e)
    e.set_defaults(handler=evaluate)
    f = actions.add_parser("features", help="features by density, or one feature's contexts, histogram, logit effects")
    _add_sae_and_model(f)
    which = f.add_mutually_exclusive_group()
    which.add_argument("--text", help="text file to scan (default: the run's own text)")
    which.add_argument("--input", help="show the features that fire on each token of TEXT")
    f.add_argument("--feature", type=int, default=None, help="one feature: its top contexts")
    f.add_argument("--top", type=int, default=10, help="features or contexts to show (default 10)")
    f.add_argument("--tokens", type=int, default=100_000, help="rows of the text to scan (default 100000)")
    f.add_argument("--sort", choices=("density", "max"), default="density",
                   help="order of the feature list: density or largest activation (default density)")
    f.add_argument("--no-cache", action="store_true",
                   help="scan the text again instead of reading the table cached for this SAE, model and text")
    add_json(f)
    f.set_defaults(handler=features)


def _widths(text: str) -> tuple[int, ...]:
    """``64,256,1024`` as (64, 256, 1024); argparse's one-line error otherwise."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"whole numbers separated by commas, such as 64,256,1024: {text!r}") from None


def _add_text(s: argparse.ArgumentParser) -> None:
    s.add_argument("--text", help="text file to read activations from (default: the run's own text)")


def _add_sae_and_model(s: argparse.ArgumentParser) -> None:
    s.add_argument("dir", metavar="DIR", help="the SAE: a folder, or ORG/REPO/SUBFOLDER in the local hub cache")
    add_run_or_model(s)
    add_device(s)


def _open(args: argparse.Namespace) -> ModelInHand:
    """The model handle of ``--run`` or ``--model`` (offline)."""
    from tui_lab.core.model.device import set_threads
    from tui_lab.core.opening.model_in_hand import open_model

    handle = open_model(args.model if args.model is not None else args.run, revision=args.revision, device=args.device)
    set_threads(0)  # passes over many tokens split well across cores (device.bulk_threads)
    return handle


def train(args: argparse.Namespace) -> int:
    """Train (or resume) an SAE at ``--hook``; the folder opens with open_sae and SAELens."""
    from tui_lab.core.verbs.sae_train import Request, run

    request = Request(args.out, args.hook, args.text, args.d_sae, args.arch, args.k, args.l1, args.tokens,
                      args.batch, args.lr, args.seed, args.resume, args.device, target_name(args), widths=args.widths)
    handle = _open(args)
    progress = Progress(args.json, args.tokens)
    try:
        result = run(request, handle, on_event=progress.on_event)
    finally:
        progress.close()
    if args.json:
        emit_json(result.to_json())
    return 0


class Progress:
    """A rich bar on a terminal, a line every two seconds otherwise, nothing with --json."""

    def __init__(self, quiet: bool, total: int) -> None:
        self.quiet, self.total = quiet, total
        self._said = 0.0
        self.bar: RichProgress | None = None
        if not quiet and sys.stdout.isatty():
            from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(TextColumn("sae"), BarColumn(), TextColumn("{task.fields[stats]}"),
                                    TimeRemainingColumn())
            self.bar.start()
            self.task = self.bar.add_task("sae", total=total, stats="")

    def on_event(self, event: SAEEvent) -> None:
        from tui_lab.core.sae.events import SAEStepEvent

        if not isinstance(event, SAEStepEvent):  # only steps move the bar
            return
        stats = (f"mse {event.mse:.4g} L0 {event.l0:.1f} EV {event.explained_variance:.3f} "
                 f"dead {event.dead_fraction:.1%}")
        if self.bar is not None:
            self.bar.update(self.task, completed=event.tokens, stats=stats)
        elif not self.quiet and time.monotonic() - self._said >= 2.0:
            self._said = time.monotonic()
            print(f"tokens {event.tokens}/{self.total} {stats}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def evaluate(args: argparse.Namespace) -> int:
    """The SAE's metrics on held-out text at its hook."""
    from tui_lab.core.verbs.sae_eval import KEYS, Request, run

    request = Request(args.dir, args.text, args.tokens, args.device, target_name(args), args.saebench,
                      args.saebench_prompts, args.saebench_batches)
    result = run(request, _open(args))
    if args.json:
        emit_json(result.to_json())
        return 0
    print(f"{args.dir} at {result.hook}, {result.metrics['tokens']:,} held-out tokens")
    for key in KEYS:
        print(f"  {key:<20} {result.metrics[key]:.4f}")
    if result.saebench is not None:
        _show_saebench(result.saebench, str(result.saebench_file))
    return 0


def _show_saebench(core: dict[str, object], where: str) -> None:
    """SAEBench's core metrics, category by category, and where the file is."""
    print(f"SAEBench core evaluation (sae-bench 0.6.0's layout) written to {where}:")
    categories = core["eval_result_metrics"]
    assert isinstance(categories, dict)
    for category, numbers in categories.items():
        shown = "  ".join(f"{key} {value:.4g}" for key, value in numbers.items())
        print(f"  {category}: {shown}")


def features(args: argparse.Namespace) -> int:
    """Features by density or largest activation, or one feature's card, or the features on --input."""
    from tui_lab.core.verbs.sae_features import Request, run

    request = Request(args.dir, args.text, args.input, args.feature, args.top, args.tokens, args.sort,
                      not args.no_cache, args.device, target_name(args))
    result = run(request, _open(args))
    if args.json:
        emit_json(result.to_json())
    elif result.card is not None:
        _show_card(result.card)
    elif result.on_input is not None:
        for r in result.on_input:
            print(f"{r['token']!r:>8}  " + "  ".join(f"{j}:{v:.2f}" for j, v in r["features"]))
    else:
        for f in result.features or []:
            print(f"feature {f['index']:>6}  density {f['density']:.4f}  max {f['max_activation']:.3f}")
    return 0


SHADES = " ░▒▓█"


def _shown(token: str) -> str:
    """A token as one printable cell run (newline and tab made visible)."""
    return token.replace("\n", "⏎").replace("\t", "⇥").replace("\r", "␍") or "∅"


def context_lines(tokens: list[str], shade: list[int], peak_at: int, around: int = 40) -> tuple[str, str]:
    """(text, shading) of a context around its peak: under each token a shade from SHADES
    (darker is stronger), the peak token between brackets with ``^`` under it."""
    lo, hi = max(0, peak_at - around), min(len(tokens), peak_at + around // 2)
    text, under = [], []
    for j in range(lo, hi):
        piece = _shown(tokens[j])
        if j == peak_at:
            text.append(f"[{piece}]")
            under.append("^" * (len(piece) + 2))
        else:
            text.append(piece)
            under.append(SHADES[shade[j]] * len(piece))
    return "".join(text), "".join(under)


def _show_card(card: FeatureCard) -> None:
    """One feature: density, logit effects, histogram, top contexts shaded."""
    print(f"feature {card['feature']}: density {card['density']:.4%} of {card['tokens']:,} tokens, "
          f"max activation {card['max_activation']:.3f}")
    effects = card["logit_effects"]
    if effects is not None:
        for kind in ("promoted", "suppressed"):
            shown = "  ".join(f"{_shown(e['token'])} {e['logit']:+.2f}" for e in effects[kind])
            print(f"  {kind:<10} {shown}")
    hist = card["histogram"]
    if hist:
        most = max(h["count"] for h in hist)
        print("  activations (log-spaced bins):")
        for h in hist:
            bar = "█" * max(1, round(28 * h["count"] / most))
            print(f"    {h['low']:8.3f} – {h['high']:8.3f}  {bar} {h['count']}")
    print(f"  top contexts (shade {SHADES[1:]!s}: weak to strong; [x] and ^: the strongest):")
    for c in card["contexts"]:
        text, under = context_lines(c["tokens"], c["shade"], c["peak_at"])
        print(f"  {c['peak']:8.3f}  {text}")
        print(f"  {'':8}  {under}")
