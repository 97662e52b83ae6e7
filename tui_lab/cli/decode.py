"""`tfx-lab decode --run DIR --input TEXT`: one decode, its sampling steps, attention,
logit lens (--lens) and one attention row written out (--explain)."""

from __future__ import annotations

import argparse
from typing import Any

from tui_lab.core.errors import LabError

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_run_or_model,
    emit_json,
    load_target,
    say_notes,
)


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


def _sampling(args: argparse.Namespace) -> dict[str, Any]:
    """The decode options, as ``generate`` and the walkthrough take them."""
    return {"max_new_tokens": args.max_new, "temperature": args.temperature, "top_k": args.top_k,
            "top_p": args.top_p, "seed": args.seed}


def decode(args: argparse.Namespace) -> int:
    """Decode one input with a trained run or a real model; JSON, or the output and what was asked for."""
    from tui_lab.core.analysis.lenses.logit_lens import logit_lens
    from tui_lab.core.decoding.decode import generate
    from tui_lab.core.decoding.fill_mask import is_fill_mask

    run = load_target(args, "cpu", args.at_step)
    if is_fill_mask(run.model):  # an encoder-only model decodes by filling masks
        return _fill_mask(run, args)
    result = generate(run.model, run.task, args.input, **_sampling(args),
                      capture=args.attention or args.json or bool(args.explain))
    lens = logit_lens(run.model, run.task, result) if args.lens else None
    explained = explain(run, result, args.explain, _sampling(args)) if args.explain else None
    if args.json:
        out = result.to_json()
        if args.attention:
            out["attention"] = {
                name: {"weights": w.tolist(), "queries": result.labels[name][0],
                       "keys": result.labels[name][1]}
                for name, w in result.attention.items()
            }
        if lens is not None:
            out["lens"] = lens.to_json()
        if explained is not None:
            out["explain"] = explained
        emit_json(out)
        return 0
    say_notes(result.notes)
    print(result.output)
    if args.attention:
        _print_attention(result)
    if args.temperature > 0 or args.lens:
        _print_steps(result)
    if lens is not None:
        _print_lens(lens)
    if explained is not None:
        _print_explain(explained)
    return 0


def _fill_mask(run: Any, args: argparse.Namespace) -> int:
    """Fill-mask: each mask's top-k fillers (``masks``), then the masks filled one at a time."""
    from tui_lab.core.decoding.fill_mask import fill_mask

    result = fill_mask(run.model, run.task, args.input, top_k=args.top_k or 5, capture=args.attention)
    if args.json:
        out = result.to_json()
        if args.attention:
            out["attention"] = {name: {"weights": w.tolist(), "queries": result.labels, "keys": result.labels}
                                for name, w in result.attention.items()}
        emit_json(out)
        return 0
    say_notes(result.notes)
    for i, m in enumerate(result.masks):
        print(f"mask {i + 1} (token {m.position}): " + "  ".join(f"{t!r} {p:.3f}" for t, p in m.top))
    for s in result.steps:
        print(f"fill token {s.position} with {s.token!r} ({s.prob:.3f}): {s.text}")
    print(result.output)
    if args.attention:
        from tui_lab.core.decoding.attention_text import render_text

        for name, w in result.attention.items():
            for h in range(w.shape[0]):
                print(f"\n{name} head {h}")
                print(render_text(w[h], result.labels, result.labels))
    return 0


def parse_explain(text: str) -> tuple[str, int]:
    """``"decoder.0.cross:1@3"`` -> ("decoder.0.cross:1", 3); LabError if malformed."""
    head, sep, row = text.rpartition("@")
    if not sep or not head:
        raise LabError(f"--explain {text!r}: expected NAME:HEAD@ROW, e.g. decoder.0.cross:1@3")
    try:
        return head, int(row)
    except ValueError:
        raise LabError(f"--explain {text!r}: {row!r} is not a query row number") from None


def explain(run: Any, result: Any, spec: str, options: dict[str, Any]) -> dict[str, Any]:
    """The walkthrough of one attention row (the lab's numbers), as a dict."""
    from tui_lab.core.analysis.basics.walkthrough import collect_projections, walk
    from tui_lab.core.analysis.heads.ablation import parse_head

    head_text, row = parse_explain(spec)
    ref = parse_head(head_text, run.model)
    projections = collect_projections(run.model, run.task, result, options)
    proj = projections.get(ref.name)
    if proj is None:
        raise LabError(f"--explain: {ref.name} did not run in this decode")
    n_rows = proj.q.size(1)
    if not 0 <= row < n_rows:
        raise LabError(f"--explain: {ref.name} has query rows 0..{n_rows - 1} in this decode")
    w = walk(proj, result, ref.name, ref.head, row)
    return {"head": str(ref), "row": row, "d_head": w.d_head, "query": w.query, "keys": w.keys,
            "raw": w.raw, "scaled": w.scaled, "weights": w.weights, "masked": w.masked,
            "output": w.output, "captured": w.captured, "max_diff": w.max_diff,
            "scale": w.scale_label}


def _print_attention(result: Any) -> None:
    from tui_lab.core.decoding.attention_text import render_text

    for name, w in result.attention.items():
        q, k = result.labels[name]
        for h in range(w.shape[0]):
            print(f"\n{name} head {h}")
            print(render_text(w[h], q, k))


def _print_explain(e: dict[str, Any]) -> None:
    print(f"\n{e['head']} query row {e['row']} ({e['query']!r}), d_head = {e['d_head']}")
    print(f"{'key':>6} {'q.k':>9} {e['scale']:>9} {'softmax':>9}")
    for key, raw, scaled, weight, masked in zip(e["keys"], e["raw"], e["scaled"], e["weights"],
                                                e["masked"], strict=False):
        print(f"{key!r:>6} {raw:>9.4f} {scaled:>9.4f} {weight:>9.4f}{'  (masked)' if masked else ''}")
    print("output (weights . values): [" + ", ".join(f"{x:.4f}" for x in e["output"]) + "]")
    print(f"max |softmax - captured weights| = {e['max_diff']:.2e}")


def _print_lens(lens: Any) -> None:
    width = max(len(s) for s in lens.layers)
    print("\nlogit lens (top token, probability) per decoding step")
    print(f"{'layer':<{width}}  " + "  ".join(f"{repr(t):>12}" for t in lens.steps))
    for name, row in zip(lens.layers, lens.rows, strict=False):
        print(f"{name:<{width}}  " + "  ".join(f"{repr(c.token) + f' {c.prob:.2f}':>12}" for c in row))


def _print_steps(result: Any) -> None:
    """The steps table with the sampling cut: '*' marks top tokens the cut kept."""
    print("\nstep  token    p      top (* = kept by the cut)")
    for i, s in enumerate(result.steps):
        tops = "  ".join(f"{'*' if k else ' '}{t!r} {p:.3f}"
                         for (t, p), k in zip(s.top, s.kept, strict=False))
        print(f"{i:>4}  {s.token!r:>6} {s.prob:.3f}  {tops}  ({s.n_kept} kept)")
