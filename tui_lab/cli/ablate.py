"""`tfx-lab ablate (--run DIR | --model SOURCE --text FILE) [--head NAME:H ...] [--mode zero|mean]`:
exact match (a run) or the loss of a text (a real model, or a run fine-tuned from one) with heads
switched off."""

from __future__ import annotations

import argparse
from typing import Any

from tui_lab.core.errors import LabError

from .progress import CountLine
from .shared import (
    Subparsers,
    add_at_step,
    add_device,
    add_examples,
    add_json,
    add_run_or_model,
    check_examples,
    emit_json,
    load_target,
    target_name,
)


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("ablate", help="exact match (a run) or a text's loss (a real model) "
                       "with attention heads switched off")
    add_run_or_model(s)
    text = s.add_mutually_exclusive_group()
    text.add_argument("--text", metavar="FILE", help="with --model (or a fine-tuned run, whose "
                      "validation text is the default): the text whose loss is measured")
    text.add_argument("--input", metavar="TEXT", help="with --model or a fine-tuned run: the text, typed")
    s.add_argument("--head", action="append", default=[], metavar="NAME:H",
                   help="a head to switch off, e.g. decoder.0.cross:2 (repeat; none: one row per head)")
    s.add_argument("--mode", default="zero",
                   help="zero (default) or mean (its mean output on the probe batch)")
    add_examples(s)
    add_device(s)
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=ablate)


def _pct(x: float) -> str:
    return f"{x:.1%}"


def ablate(args: argparse.Namespace) -> int:
    """Exact match with heads switched off; without --head, one row per head sorted by drop."""
    check_examples(args.n)
    if args.model is not None:
        return ablate_text(args)
    if args.revision is not None:
        raise LabError("--revision goes with --model")
    if (args.text is not None or args.input is not None) and not _fine_tuned(args.run):
        raise LabError("--text and --input go with --model or a fine-tuned run (a run is scored on its task)")
    run = load_target(args, args.device, args.at_step)
    if run.config.task.name == "token-lm":  # fine-tuned from a real model: scored on a text too
        return ablate_text(args, run)
    from tui_lab.core.analysis.heads.ablation import check_mode, parse_head
    from tui_lab.core.analysis.heads.head_importance import (
        cached_importance,
        importance,
        probe_means,
        weights_key,
    )
    from tui_lab.core.training.evaluate import held_out_pairs

    mode = check_mode(args.mode)
    if run.task.is_lm:
        raise LabError(f"{args.run}: ablate measures exact match; "
                       f"{run.config.task.name} has no single right answer")
    heads = [parse_head(h, run.model) for h in args.head]  # every name checked before any work
    pairs = held_out_pairs(run.task, run.config.train, args.n)
    max_new = run.config.sequence_length_needed()
    arch = run.config.model.arch
    means = probe_means(run.model, run.task, arch, pairs, run.device) if mode == "mean" else None
    if heads:
        return _ablate_heads(args, run, heads, pairs, mode, means)

    # On a terminal, one line counts the heads in place; piped or --json, nothing.
    progress = CountLine("ablating head", enabled=not args.json)
    try:
        key = weights_key(args.run, args.at_step)
        table, cached = cached_importance(
            args.run, key, lambda: importance(run.model, run.task, pairs, max_new, mode, means, progress),
            mode=mode, n=len(pairs))
    finally:
        progress.close()
    if args.json:
        emit_json({**table.to_json(), "step": run.step, "cached": cached})
        return 0
    print(f"{args.run}: step {run.step}, {table.n} held-out, mode {mode}, baseline exact match "
          f"{_pct(table.baseline)}{' (cached)' if cached else ''}")
    width = max(len(r.head) for r in table.rows)
    print(f"{'head':<{width}}  {'exact':>7}  {'drop':>7}")
    for r in table.rows:
        print(f"{r.head:<{width}}  {_pct(r.exact_match):>7}  {r.drop:>+7.1%}")
    return 0


def _ablate_heads(args: argparse.Namespace, run: Any, heads: list[Any], pairs: list[Any], mode: str,
                  means: Any) -> int:
    """Exact match with the named heads switched off together, against none off."""
    from tui_lab.core.analysis.heads.head_importance import ablated_accuracy

    max_new = run.config.sequence_length_needed()
    baseline = ablated_accuracy(run.model, run.task, pairs, max_new)
    acc = ablated_accuracy(run.model, run.task, pairs, max_new, heads, mode, means)
    names = [str(h) for h in heads]
    if args.json:
        emit_json({"heads": names, "mode": mode, "n": len(pairs), "baseline": baseline,
                   "exact_match": acc, "drop": baseline - acc, "step": run.step})
    else:
        print(f"{args.run}: step {run.step}, {len(pairs)} held-out, mode {mode}")
        print(f"baseline exact match {_pct(baseline)}; with {', '.join(names)} "
              f"ablated {_pct(acc)} (drop {baseline - acc:+.1%})")
    return 0


def _read_text(args: argparse.Namespace) -> str:
    if args.input is not None:
        return str(args.input)
    if args.text is None:
        raise LabError("ablate --model measures the loss of a text: give --text FILE or --input TEXT")
    from tui_lab.core.tasks.text import read_text_file

    return read_text_file(args.text)


def _fine_tuned(run_dir: str) -> bool:
    """Whether ``run_dir`` is a run fine-tuned from a real model (its task token-lm)."""
    from tui_lab.core.runs.folder import RunFolder

    try:
        return RunFolder.read(run_dir, need_state=False).config.task.name == "token-lm"
    except LabError:
        return False


def _run_text_ids(run: Any) -> list[int]:
    """A fine-tuned run's default text: the start of its validation split, one context long."""
    task = run.task
    return [int(i) for i in task.data[task.split : task.split + run.config.model.max_len].tolist()]


def ablate_text(args: argparse.Namespace, run: Any = None) -> int:
    """A real model (or a run fine-tuned from one, ``run``): the loss of a text with heads off;
    without --head, one row per head by rise."""
    from tui_lab.core.analysis.heads.ablation import check_mode, parse_head
    from tui_lab.core.analysis.heads.text_ablation import (
        loss_with_heads_off,
        text_ids,
        text_importance,
        text_means,
    )

    mode = check_mode(args.mode)
    if run is None and args.at_step is not None:
        raise LabError("--at-step reads a run's history; a model opened with --model has none")
    if run is not None and args.text is None and args.input is None:
        ids = _run_text_ids(run)
    else:
        text = _read_text(args)
        run = run if run is not None else load_target(args, args.device)
        ids = text_ids(run.task, text, run.config.model.max_len)
    name = target_name(args)
    where: dict[str, Any] = {"model": args.model} if args.model is not None else {"run": args.run, "step": run.step}
    heads = [parse_head(h, run.model) for h in args.head]
    if heads:
        means = text_means(run.model, ids) if mode == "mean" else None
        baseline = loss_with_heads_off(run.model, ids, [])
        loss = loss_with_heads_off(run.model, ids, heads, mode, means)
        names = [str(h) for h in heads]
        if args.json:
            emit_json({**where, "heads": names, "mode": mode, "n_tokens": len(ids) - 1,
                       "baseline": baseline, "loss": loss, "rise": loss - baseline})
        else:
            print(f"{name}: {len(ids) - 1} predicted tokens, mode {mode}")
            print(f"baseline loss {baseline:.4f}; with {', '.join(names)} ablated {loss:.4f} "
                  f"(rise {loss - baseline:+.4f})")
        return 0
    progress = CountLine("ablating head", enabled=not args.json)
    try:
        table = text_importance(run.model, ids, mode, progress)
    finally:
        progress.close()
    if args.json:
        emit_json({**where, **table.to_json()})
        return 0
    print(f"{name}: {table.n_tokens} predicted tokens, mode {mode}, baseline loss {table.baseline:.4f}")
    width = max(len(r.head) for r in table.rows)
    print(f"{'head':<{width}}  {'loss':>8}  {'rise':>8}")
    for r in table.rows:
        print(f"{r.head:<{width}}  {r.loss:>8.4f}  {r.rise:>+8.4f}")
    return 0
