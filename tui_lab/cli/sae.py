"""`tfx-lab sae train|eval|features`: sparse autoencoders on a model's hook, in SAELens's format.

    sae train (--run R | --model SOURCE) --hook NAME [--text FILE] --d-sae N --arch topk|relu|jumprelu
              [--k K] [--l1 C] [--tokens N] [--batch B] [--lr LR] --out DIR [--resume]
    sae eval DIR (--run | --model) [--text FILE] [--json]
    sae features DIR (--run | --model) [--text FILE | --input TEXT] [--feature I] [--top N] [--sort density|max] [--json]

Activations come from the text (``--text``, else the run's own text: a char-lm
run's) through the model at the hook, window by window; the last tenth of the
text is held out for CE loss recovered and for ``eval``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from tui_lab.core.sae import defaults as DEFAULT

from .shared import Subparsers, add_device, add_json, add_run_or_model, emit_json, target_name

ARCHS = {"topk": "topk", "relu": "standard", "standard": "standard", "jumprelu": "jumprelu"}
HELD_OUT = 0.1  # the share of the text kept out of training
CE_WINDOWS = 8  # held-out windows CE loss recovered is measured on
CONTEXTS = 10  # top contexts kept per feature in the cached table (more with --top)


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("sae", help="sparse autoencoders on a hook: train, evaluate, browse (SAELens's format)")
    actions = s.add_subparsers(dest="sae_action", metavar="ACTION", required=True)
    t = actions.add_parser("train", help="train an SAE on a model's activations at a hook")
    add_run_or_model(t)
    t.add_argument("--hook", required=True, help="hook point, such as blocks.1.hook_resid_post (tfx-lab hooks)")
    _add_text(t)
    t.add_argument("--d-sae", type=int, default=None, help="features (required unless --resume)")
    t.add_argument("--arch", choices=sorted(ARCHS), default="topk", help="architecture (default topk)")
    t.add_argument("--k", type=int, default=DEFAULT.K, help=f"topk: features per token (default {DEFAULT.K})")
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


def _add_text(s: argparse.ArgumentParser) -> None:
    s.add_argument("--text", help="text file to read activations from (default: the run's own text)")


def _add_sae_and_model(s: argparse.ArgumentParser) -> None:
    s.add_argument("dir", metavar="DIR", help="the SAE: a folder, or ORG/REPO/SUBFOLDER in the local hub cache")
    add_run_or_model(s)
    add_device(s)


def _open(args: argparse.Namespace) -> Any:
    """The model handle of ``--run`` or ``--model`` (offline)."""
    from tui_lab.core.model.device import set_threads
    from tui_lab.core.opening.model_in_hand import open_model

    handle = open_model(args.model if args.model is not None else args.run, args.device, revision=args.revision)
    set_threads(0)  # passes over many tokens split well across cores (device.bulk_threads)
    return handle


def _texts(args: argparse.Namespace, handle: Any) -> tuple[str, str]:
    """(training text, held-out text): ``--text`` split 90/10, else the run's own split."""
    from tui_lab.core.errors import LabError

    if getattr(args, "text", None):
        try:
            with open(args.text, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise LabError(f"--text {args.text}: cannot read it ({exc.__class__.__name__})") from None
        cut = int(len(text) * (1 - HELD_OUT))
        return text[:cut], text[cut:]
    task = handle.task
    if hasattr(task, "train_text") and hasattr(task, "val_text"):
        return task.train_text, task.val_text
    raise LabError(f"--text FILE: {target_name(args)} has no text of its own to read activations from")


def _windows(handle: Any, text: str) -> Any:
    """The text's ids cut into windows of the model's context (at most 128 tokens)."""
    from tui_lab.core.sae.recipe import text_windows

    return text_windows(handle, text)


def _scored(handle: Any, held_out: Any) -> Any:
    """The few held-out windows CE loss recovered is measured on (``scored_text``), once."""
    from tui_lab.core.sae.activations import scored_text

    return scored_text(handle, held_out[:CE_WINDOWS])


def _ce(handle: Any, sae: Any, hook: str, scored: Any) -> Any:
    """CE clean, zero-ablated and reconstructed on the scored windows."""
    from tui_lab.core.sae.activations import logits_under, reconstruction
    from tui_lab.core.sae.metrics import ce_losses

    return ce_losses(logits_under(handle, scored.ids, hook, scored.target), scored.tokens, reconstruction(sae),
                     scored.shift)


def train(args: argparse.Namespace) -> int:
    """Train (or resume) an SAE at ``--hook``; the folder opens with open_sae and SAELens."""
    from tui_lab.core.sae.activations import check_width, hook_activations, site_width
    from tui_lab.core.sae.feature_cache import recorder
    from tui_lab.core.sae.trainer import SAETrainer

    handle = _open(args)
    train_text, held_text = _texts(args, handle)
    windows, held_out = _windows(handle, train_text), _windows(handle, held_text)
    width = site_width(handle, args.hook, windows[:1])
    if args.resume:
        trainer = SAETrainer.resume(args.out, tokens=args.tokens, device=args.device)
    else:
        trainer = SAETrainer(*_new_sae(args, width, windows.shape[1]), args.out)
    check_width(trainer.sae, args.hook, width)
    progress = Progress(args.json, args.tokens)
    trainer.on_event = progress.on_event
    scored = _scored(handle, held_out)
    trainer.evaluate = lambda sae: {"ce_loss_recovered": _ce(handle, sae, args.hook, scored).recovered}
    per_pass = max(1, 4096 // windows.shape[1])
    try:
        # the first windows' activations are kept for the feature table (sae features, the lab)
        kept = recorder(handle, windows, args.hook)
        end = trainer.train(kept.wrap(hook_activations(handle, windows, args.hook, per_pass, epochs=None,
                                                       seed=args.seed)))
    finally:
        progress.close()
    summary = {"out": str(args.out), "hook": args.hook, "step": end.step, "tokens": end.tokens,
               "reason": end.reason, "seconds": round(end.elapsed, 2), **progress.last}
    if args.json:
        emit_json(summary)
    return 0


def _new_sae(args: argparse.Namespace, width: int, context: int) -> tuple[Any, Any]:
    """A fresh SAE and its settings from the command's options."""
    from pathlib import Path

    from tui_lab.core.errors import LabError
    from tui_lab.core.sae.checkpoint import STATE_FILE
    from tui_lab.core.sae.recipe import new_sae, train_settings

    if (Path(args.out) / STATE_FILE).exists():
        raise LabError(f"--out {args.out} holds an SAE training run: --resume continues it, or choose another")
    if args.d_sae is None:
        raise LabError("--d-sae N: how many features (such as 1024)")
    arch = ARCHS[args.arch]
    sae = new_sae(width, args.d_sae, arch, args.k, args.hook, target_name(args), context, args.device, args.seed)
    coefficient = {} if args.l1 is None else {"l1_coefficient": args.l1, "l0_coefficient": args.l1}
    return sae, train_settings(args.tokens, args.batch, args.lr, args.seed, **coefficient)


class Progress:
    """A rich bar on a terminal, a line every two seconds otherwise, nothing with --json."""

    def __init__(self, quiet: bool, total: int) -> None:
        self.quiet, self.total = quiet, total
        self.last: dict[str, Any] = {}
        self._said = 0.0
        self.bar: Any = None
        if not quiet and sys.stdout.isatty():
            from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(TextColumn("sae"), BarColumn(), TextColumn("{task.fields[stats]}"),
                                    TimeRemainingColumn())
            self.bar.start()
            self.task = self.bar.add_task("sae", total=total, stats="")

    def on_event(self, event: Any) -> None:
        if event.kind != "step":
            return
        self.last = {k: event.record()[k] for k in ("l0", "explained_variance", "fvu", "mse", "dead_fraction")}
        if "ce_loss_recovered" in event.extra:
            self.last["ce_loss_recovered"] = event.extra["ce_loss_recovered"]
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
    from tui_lab.core.sae.activations import check_width, hook_activations, site_width
    from tui_lab.core.sae.evaluation import evaluate_sae
    from tui_lab.core.sae.source import open_sae

    sae = open_sae(args.dir, device=args.device)
    hook = _hook_of(sae)
    handle = _open(args)
    held_out = _windows(handle, _texts(args, handle)[1])
    check_width(sae, hook, site_width(handle, hook, held_out[:1]))
    acts = hook_activations(handle, held_out, hook, max(1, 4096 // held_out.shape[1]))
    result = evaluate_sae(sae, acts, args.tokens, _ce(handle, sae, hook, _scored(handle, held_out)))
    if args.json:
        emit_json({"sae": str(args.dir), "hook": hook, **result})
        return 0
    print(f"{args.dir} at {hook}, {result['tokens']:,} held-out tokens")
    for key in ("l0", "explained_variance", "fvu", "mse", "dead_fraction", "ce_loss_recovered"):
        print(f"  {key:<20} {result[key]:.4f}")
    return 0


def _hook_of(sae: Any) -> str:
    from tui_lab.core.errors import LabError

    hook = sae.cfg.metadata.hook_name
    if not hook:
        raise LabError("the SAE's cfg.json names no hook_name (metadata.hook_name)")
    return str(hook)


def features(args: argparse.Namespace) -> int:
    """Features by density or largest activation, or one feature's card, or the features on --input."""
    from tui_lab.core.errors import LabError
    from tui_lab.core.sae.activations import check_width, site_width
    from tui_lab.core.sae.feature_cache import cached_feature_table
    from tui_lab.core.sae.source import open_sae

    sae = open_sae(args.dir, device=args.device)
    hook = _hook_of(sae)
    handle = _open(args)
    if args.feature is not None and not 0 <= args.feature < sae.cfg.d_sae:
        raise LabError(f"--feature {args.feature}: the SAE has features 0 to {sae.cfg.d_sae - 1}")
    if args.top < 1:
        raise LabError(f"--top {args.top}: show at least 1")
    if args.input is not None:
        return _on_input(args, sae, handle, hook)
    windows = _windows(handle, _texts(args, handle)[0])
    windows = windows[: max(1, args.tokens // windows.shape[1])]
    check_width(sae, hook, site_width(handle, hook, windows[:1]))
    table, _cached = cached_feature_table(handle, sae, windows, hook, top=max(args.top, CONTEXTS),
                                          use_cache=not args.no_cache)
    assert table is not None
    if args.feature is not None:
        return _show_feature(args, handle, sae, table)
    key = table.density if args.sort == "density" else table.max
    order = key.argsort(descending=True, stable=True)[: args.top].tolist()
    rows = [{"index": i, "density": float(table.density[i]), "max_activation": float(table.max[i])}
            for i in order]
    if args.json:
        emit_json({"sae": str(args.dir), "hook": hook, "tokens": table.tokens, "sort": args.sort,
                   "features": rows})
    else:
        for r in rows:
            print(f"feature {r['index']:>6}  density {r['density']:.4f}  max {r['max_activation']:.3f}")
    return 0


def feature_card(handle: Any, sae: Any, table: Any, i: int, top: int) -> dict[str, Any]:
    """One feature as ``sae features --feature I --json`` prints it."""
    from tui_lab.core.sae.feature_table import logit_effects, shade_levels, unembedding

    contexts = []
    for c in table.contexts(i)[:top]:
        contexts.append({"tokens": handle.to_str_tokens(c.ids), "activations": [round(a, 4) for a in c.activations],
                         "peak": round(c.peak, 4), "peak_at": c.peak_at,
                         "shade": shade_levels(c.activations, c.peak)})
    card: dict[str, Any] = {
        "feature": i, "density": float(table.density[i]), "max_activation": float(table.max[i]),
        "tokens": table.tokens,
        "histogram": [{"low": lo, "high": hi, "count": n} for lo, hi, n in table.histogram(i)],
        "logit_effects": None, "contexts": contexts,
    }
    w_u = unembedding(handle.model)
    if w_u is not None and w_u.shape[0] == sae.cfg.d_in:
        effects = logit_effects(sae, i, w_u.to(sae.W_dec.device), top)
        label = handle.task.vocab.label
        card["logit_effects"] = {
            "promoted": [{"token": label(t), "logit": round(v, 4)} for t, v in effects.promoted],
            "suppressed": [{"token": label(t), "logit": round(v, 4)} for t, v in effects.suppressed],
        }
    return card


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


def _show_feature(args: argparse.Namespace, handle: Any, sae: Any, table: Any) -> int:
    card = feature_card(handle, sae, table, args.feature, args.top)
    if args.json:
        emit_json({"sae": str(args.dir), "hook": _hook_of(sae), **card})
        return 0
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
    return 0


def _on_input(args: argparse.Namespace, sae: Any, handle: Any, hook: str) -> int:
    """Each token of --input with the features that fire on it, strongest first."""
    import torch

    from tui_lab.core.sae.activations import check_width, flat_site

    ids = handle.to_tokens(args.input)
    with torch.no_grad():
        _, cache = handle.run_with_cache(ids, names=[hook])
        act = flat_site(cache[hook])[0]
        check_width(sae, hook, act.shape[-1])
        f = sae.encode(act)
    rows = []
    for token, acts in zip(handle.to_str_tokens(ids), f, strict=True):
        values, index = acts.topk(min(args.top, acts.numel()))
        rows.append({"token": token, "features": [[int(j), round(float(v), 4)]
                                                 for v, j in zip(values, index, strict=True) if v > 0]})
    if args.json:
        emit_json({"sae": str(args.dir), "hook": hook, "tokens": rows})
    else:
        for r in rows:
            print(f"{r['token']!r:>8}  " + "  ".join(f"{j}:{v:.2f}" for j, v in r["features"]))
    return 0
