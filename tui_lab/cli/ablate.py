"""`tfx-lab ablate (--run DIR | --model SOURCE --text FILE) [--head NAME:H ...] [--mode zero|mean]`:
exact match (a run) or the loss of a text (a real model, or a run fine-tuned from one) with heads
switched off."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from tui_lab.core.errors import LabError

from .progress import CountLine

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.head_importance import ImportanceTable
    from tui_lab.core.analysis.heads.text_ablation import TextImportance
    from tui_lab.core.verbs.ablate import HeadsOff
from .shared import (
    Subparsers,
    add_at_step,
    add_device,
    add_examples,
    add_json,
    add_run_or_model,
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
    from tui_lab.core.verbs.ablate import HeadsOff, Request, run

    request = Request(tuple(args.head), args.mode, args.n)  # numbers first, as they always were
    request = replace(request, text=_text_before_opening(args), typed=args.input is not None,
                      run_dir=args.run if args.model is None else None, at_step=args.at_step)
    lab = load_target(args, args.device, args.at_step)
    # On a terminal, one line counts the heads in place; piped or --json, nothing.
    count = CountLine("ablating head", enabled=not args.json)
    try:
        result = run(request, lab, lambda done, total, _what: count(done, total))
    finally:
        count.close()
    from tui_lab.core.analysis.heads.text_ablation import TextImportance

    if isinstance(result, HeadsOff):
        _print_heads_off(args, result)
    elif isinstance(result.table, TextImportance):  # ``text``: a text's loss
        _print_text_table(args, result.table, result.step)
    else:
        _print_table(args, result.table, result.step, result.cached)
    return 0


def _text_before_opening(args: argparse.Namespace) -> str | None:
    """The text to score (typed or read from --text), every mistake about it said before the
    model is opened; None: the run's own task (or a fine-tuned run's validation text)."""
    if args.model is None:
        if args.revision is not None:
            raise LabError("--revision goes with --model")
        if (args.text is not None or args.input is not None) and not _fine_tuned(args.run):
            raise LabError("--text and --input go with --model or a fine-tuned run (a run is scored on its task)")
    elif args.at_step is not None:
        raise LabError("--at-step reads a run's history; a model opened with --model has none")
    if args.input is not None:
        return str(args.input)
    if args.text is None:
        if args.model is not None:
            raise LabError("ablate --model measures the loss of a text: give --text FILE or --input TEXT")
        return None
    from tui_lab.core.tasks.text import read_text_file

    return read_text_file(args.text)


def _fine_tuned(run_dir: str) -> bool:
    """Whether ``run_dir`` is a run fine-tuned from a real model (its task token-lm)."""
    from tui_lab.core.runs.folder import RunFolder

    try:
        return RunFolder.read(run_dir, need_state=False).config.task.name == "token-lm"
    except LabError:
        return False


def _where(args: argparse.Namespace, step: int) -> dict[str, object]:
    return {"model": args.model} if args.model is not None else {"run": args.run, "step": step}


def _print_heads_off(args: argparse.Namespace, r: HeadsOff) -> None:
    """The named heads off together, against none off."""
    if args.json:
        emit_json({**_where(args, r.step), **r.to_json()} if r.text else r.to_json())
    elif r.text:
        print(f"{target_name(args)}: {r.n} predicted tokens, mode {r.mode}")
        print(f"baseline loss {r.baseline:.4f}; with {', '.join(r.heads)} ablated {r.score:.4f} "
              f"(rise {r.score - r.baseline:+.4f})")
    else:
        print(f"{args.run}: step {r.step}, {r.n} held-out, mode {r.mode}")
        print(f"baseline exact match {_pct(r.baseline)}; with {', '.join(r.heads)} "
              f"ablated {_pct(r.score)} (drop {r.baseline - r.score:+.1%})")


def _print_table(args: argparse.Namespace, table: ImportanceTable, step: int, cached: bool) -> None:
    """One row per head by drop in exact match."""
    if args.json:
        emit_json({**table.to_json(), "step": step, "cached": cached})
        return
    print(f"{args.run}: step {step}, {table.n} held-out, mode {table.mode}, baseline exact match "
          f"{_pct(table.baseline)}{' (cached)' if cached else ''}")
    width = max(len(r.head) for r in table.rows)
    print(f"{'head':<{width}}  {'exact':>7}  {'drop':>7}")
    for r in table.rows:
        print(f"{r.head:<{width}}  {_pct(r.exact_match):>7}  {r.drop:>+7.1%}")


def _print_text_table(args: argparse.Namespace, table: TextImportance, step: int) -> None:
    """One row per head by rise in a text's loss."""
    if args.json:
        emit_json({**_where(args, step), **table.to_json()})
        return
    print(f"{target_name(args)}: {table.n_tokens} predicted tokens, mode {table.mode}, "
          f"baseline loss {table.baseline:.4f}")
    width = max(len(r.head) for r in table.rows)
    print(f"{'head':<{width}}  {'loss':>8}  {'rise':>8}")
    for r in table.rows:
        print(f"{r.head:<{width}}  {r.loss:>8.4f}  {r.rise:>+8.4f}")
