"""`tfx-lab decode --run DIR --input TEXT`: one decode, its sampling steps, attention,
logit lens (--lens) and one attention row written out (--explain)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_run_or_model,
    emit_json,
    load_target,
    say_notes,
)

if TYPE_CHECKING:
    from tui_lab.core.analysis.lenses.logit_lens import LensTable
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.verbs.decode import Explained, Request


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("decode", help="greedy decoding of typed input with a trained run or a real model")
    add_run_or_model(s)
    s.add_argument("--input", required=True, help="input text, e.g. 31415")
    add_at_step(s)
    s.add_argument("--attention", action="store_true", help="print attention heatmaps")
    s.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    s.add_argument("--top-k", type=int, default=0, help="sample from the k best (0 = all); "
                   "fill-mask (encoder-only): fillers shown per mask (0 = 5)")
    s.add_argument("--max-new", type=int, help="most tokens to generate")
    add_json(s)
    s.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling: keep the most likely "
                   "tokens whose probability adds up to P (1 = all, default)")
    s.add_argument("--seed", type=int, default=0,
                   help="sampling seed (default 0): same seed, same output")
    s.add_argument("--lens", action="store_true", help="logit lens: each layer's top token per step")
    s.add_argument("--explain", metavar="NAME:H@ROW", help="one attention row written out, "
                   "e.g. decoder.0.cross:1@3")
    s.set_defaults(handler=decode)


def request(args: argparse.Namespace) -> Request:
    """The decode verb's request for these arguments; LabError (one line) for a refused number."""
    from tui_lab.core.verbs.decode import Request

    return Request(args.input, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                   seed=args.seed, max_new=args.max_new,
                   capture=args.attention or args.json or bool(args.explain),
                   attention=args.attention, lens=args.lens, explain=args.explain)


def decode(args: argparse.Namespace) -> int:
    """Decode one input with a trained run or a real model; JSON, or the output and what was asked for."""
    from tui_lab.core.verbs.decode import run

    asked = request(args)  # a refused number says so before the model is opened
    result = run(asked, load_target(args, "cpu", args.at_step))
    if args.json:
        emit_json(result.to_json())
        return 0
    say_notes(result.decoded.notes)
    from tui_lab.core.decoding.fill_mask import FillMaskResult

    if isinstance(result.decoded, FillMaskResult):  # ``fill``: an encoder-only model's
        _print_fill(result.decoded, args.attention)
        return 0
    print(result.decoded.output)
    if args.attention:
        _print_attention(result.decoded)
    if args.temperature > 0 or args.lens:
        _print_steps(result.decoded)
    if result.lens is not None:
        _print_lens(result.lens)
    if result.explained is not None:
        _print_explain(result.explained)
    return 0


def _print_fill(result: FillMaskResult, attention: bool) -> None:
    """Fill-mask: each mask's top-k fillers, then the masks filled one at a time."""
    for i, m in enumerate(result.masks):
        print(f"mask {i + 1} (token {m.position}): " + "  ".join(f"{t!r} {p:.3f}" for t, p in m.top))
    for s in result.steps:
        print(f"fill token {s.position} with {s.token!r} ({s.prob:.3f}): {s.text}")
    print(result.output)
    if attention:
        from tui_lab.core.decoding.attention_text import render_text

        for name, w in result.attention.items():
            for h in range(w.shape[0]):
                print(f"\n{name} head {h}")
                print(render_text(w[h], result.labels, result.labels))


def _print_attention(result: DecodeResult) -> None:
    from tui_lab.core.decoding.attention_text import render_text

    for name, w in result.attention.items():
        q, k = result.labels[name]
        for h in range(w.shape[0]):
            print(f"\n{name} head {h}")
            print(render_text(w[h], q, k))


def _print_explain(e: Explained) -> None:
    print(f"\n{e['head']} query row {e['row']} ({e['query']!r}), d_head = {e['d_head']}")
    print(f"{'key':>6} {'q.k':>9} {e['scale']:>9} {'softmax':>9}")
    for key, raw, scaled, weight, masked in zip(e["keys"], e["raw"], e["scaled"], e["weights"],
                                                e["masked"], strict=False):
        print(f"{key!r:>6} {raw:>9.4f} {scaled:>9.4f} {weight:>9.4f}{'  (masked)' if masked else ''}")
    print("output (weights . values): [" + ", ".join(f"{x:.4f}" for x in e["output"]) + "]")
    print(f"max |softmax - captured weights| = {e['max_diff']:.2e}")


def _print_lens(lens: LensTable) -> None:
    width = max(len(s) for s in lens.layers)
    print("\nlogit lens (top token, probability) per decoding step")
    print(f"{'layer':<{width}}  " + "  ".join(f"{repr(t):>12}" for t in lens.steps))
    for name, row in zip(lens.layers, lens.rows, strict=False):
        print(f"{name:<{width}}  " + "  ".join(f"{repr(c.token) + f' {c.prob:.2f}':>12}" for c in row))


def _print_steps(result: DecodeResult) -> None:
    """The steps table with the sampling cut: '*' marks top tokens the cut kept."""
    print("\nstep  token    p      top (* = kept by the cut)")
    for i, s in enumerate(result.steps):
        tops = "  ".join(f"{'*' if k else ' '}{t!r} {p:.3f}"
                         for (t, p), k in zip(s.top, s.kept, strict=False))
        print(f"{i:>4}  {s.token!r:>6} {s.prob:.3f}  {tops}  ({s.n_kept} kept)")
