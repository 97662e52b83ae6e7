"""`tfx-lab ablate`, and what `decode` prints for --lens, --explain and the sampling cut.

Parsing lives in cli.py; `commands.decode` calls ``decode_extras`` after it decodes.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tui_lab.core.errors import LabError


def _fmt_pct(x: float) -> str:
    return f"{x:.1%}"


def ablate(args: argparse.Namespace) -> int:
    """Exact match with heads switched off; without --head, one row per head sorted by drop."""
    if args.n <= 0:
        raise LabError(f"--n: must be > 0, got {args.n}")
    from tui_lab.core.analysis.ablation import check_mode, parse_head
    from tui_lab.core.analysis.head_importance import (
        ablated_accuracy,
        cached_importance,
        importance,
        probe_means,
        weights_key,
    )
    from tui_lab.core.training.evaluate import held_out_pairs

    from .commands import _load_for_inference

    mode = check_mode(args.mode)
    run = _load_for_inference(args.run, args.device, args.at_step)
    if run.task.is_lm:
        raise LabError(f"{args.run}: ablate measures exact match; {run.config.task.name} has no single right answer")
    heads = [parse_head(h, run.model) for h in args.head]  # every name checked before any work
    pairs = held_out_pairs(run.task, run.config.train, args.n)
    max_new = run.config.sequence_length_needed()
    arch = run.config.model.arch
    means = probe_means(run.model, run.task, arch, pairs, run.device) if mode == "mean" else None
    if heads:
        baseline = ablated_accuracy(run.model, run.task, pairs, max_new)
        acc = ablated_accuracy(run.model, run.task, pairs, max_new, heads, mode, means)
        result = {"heads": [str(h) for h in heads], "mode": mode, "n": len(pairs),
                  "baseline": baseline, "exact_match": acc, "drop": baseline - acc, "step": run.step}
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{args.run}: step {run.step}, {len(pairs)} held-out, mode {mode}")
            print(f"baseline exact match {_fmt_pct(baseline)}; with {', '.join(result['heads'])} "
                  f"ablated {_fmt_pct(acc)} (drop {baseline - acc:+.1%})")
        return 0

    def progress(done: int, total: int) -> None:
        if not args.json:
            print(f"\rablating head {done}/{total}", end="", file=sys.stderr, flush=True)

    def compute() -> Any:
        return importance(run.model, run.task, pairs, max_new, mode, means, progress)

    key = weights_key(args.run, args.at_step)
    table, cached = cached_importance(args.run, key, compute, mode=mode, n=len(pairs))
    if not args.json and not cached:
        print(file=sys.stderr)
    if args.json:
        print(json.dumps({**table.to_json(), "step": run.step, "cached": cached}))
        return 0
    print(f"{args.run}: step {run.step}, {table.n} held-out, mode {mode}, baseline exact match "
          f"{_fmt_pct(table.baseline)}{' (cached)' if cached else ''}")
    width = max(len(r.head) for r in table.rows)
    print(f"{'head':<{width}}  {'exact':>7}  {'drop':>7}")
    for r in table.rows:
        print(f"{r.head:<{width}}  {_fmt_pct(r.exact_match):>7}  {r.drop:>+7.1%}")
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
    from tui_lab.core.analysis.ablation import parse_head
    from tui_lab.core.analysis.walkthrough import collect_projections, walk

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
            "output": w.output, "captured": w.captured, "max_diff": w.max_diff}


def _print_explain(e: dict[str, Any]) -> None:
    print(f"\n{e['head']} query row {e['row']} ({e['query']!r}), d_head = {e['d_head']}")
    print(f"{'key':>6} {'q.k':>9} {'/sqrt(d)':>9} {'softmax':>9}")
    for key, raw, scaled, weight, masked in zip(e["keys"], e["raw"], e["scaled"], e["weights"], e["masked"],
                                                strict=False):
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
        tops = "  ".join(f"{'*' if k else ' '}{t!r} {p:.3f}" for (t, p), k in zip(s.top, s.kept, strict=False))
        print(f"{i:>4}  {s.token!r:>6} {s.prob:.3f}  {tops}  ({s.n_kept} kept)")


def decode_extras(args: argparse.Namespace, run: Any, result: Any, out: dict[str, Any] | None) -> None:
    """Add --lens/--explain to the JSON ``out`` (when given), else print them and the steps."""
    from tui_lab.core.analysis.logit_lens import logit_lens

    lens = logit_lens(run.model, run.task, result) if args.lens else None
    options = {"max_new_tokens": args.max_new, "temperature": args.temperature, "top_k": args.top_k,
               "top_p": args.top_p, "seed": args.seed}
    explained = explain(run, result, args.explain, options) if args.explain else None
    if out is not None:
        if lens is not None:
            out["lens"] = lens.to_json()
        if explained is not None:
            out["explain"] = explained
        return
    if args.temperature > 0 or args.lens:
        _print_steps(result)
    if lens is not None:
        _print_lens(lens)
    if explained is not None:
        _print_explain(explained)


def add_parsers(sub: Any) -> None:
    """``ablate``'s parser (cli.py calls this)."""
    s = sub.add_parser("ablate", help="exact match with attention heads switched off")
    s.add_argument("--run", required=True, help="run folder")
    s.add_argument("--head", action="append", default=[], metavar="NAME:H",
                   help="a head to switch off, e.g. decoder.0.cross:2 (repeat; none: one row per head)")
    s.add_argument("--mode", default="zero", help="zero (default) or mean (its mean output on the probe batch)")
    s.add_argument("--n", type=int, default=500, help="held-out examples (default 500)")
    s.add_argument("--device", default="cpu", help="device (default cpu)")
    s.add_argument("--at-step", type=int, metavar="N", help="use the history snapshot of step N")
    s.add_argument("--json", action="store_true", help="print JSON")


def add_decode_options(s: argparse.ArgumentParser) -> None:
    """decode's --top-p, --seed, --lens and --explain (cli.py calls this)."""
    s.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling: keep the most likely tokens "
                   "whose probability adds up to P (1 = all, default)")
    s.add_argument("--seed", type=int, default=0, help="sampling seed (default 0): same seed, same output")
    s.add_argument("--lens", action="store_true", help="logit lens: each layer's top token per step")
    s.add_argument("--explain", metavar="NAME:H@ROW", help="one attention row written out, "
                   "e.g. decoder.0.cross:1@3")
