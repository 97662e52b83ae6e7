"""`tfx-lab patch (--run DIR | --model SOURCE)`: activation patching (or attribution patching)
of one site over a clean / corrupted pair, as a grid of normalised logit differences."""

from __future__ import annotations

import argparse
from typing import Any

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_run_or_model,
    emit_json,
    load_target,
    target_name,
)

PAIR_OPTIONS = ("clean", "corrupt", "answer", "wrong")


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("patch", help="activation patching: which activations carry the answer")
    add_run_or_model(s)
    s.add_argument("--clean", metavar="TEXT", help="the clean input (the model gives --answer)")
    s.add_argument("--corrupt", metavar="TEXT", help="the corrupted input, as many tokens as --clean")
    s.add_argument("--answer", metavar="TOK", help="the clean run's answer: one token")
    s.add_argument("--wrong", metavar="TOK", help="the answer the corruption leads to: one token")
    s.add_argument("--pair", metavar="NAME",
                   help="a ready-made pair instead: ioi (opened models), translation (opened "
                        "translators), the run's task (induction, copy, ...)")
    s.add_argument("--target", metavar="TEXT",
                   help="an encoder-decoder's decoder input after its start token, the same in both "
                        "runs (default: none); the answer is its next token")
    s.add_argument("--stack", choices=("encoder", "decoder"),
                   help="an encoder-decoder's stack to patch by position (default: encoder)")
    s.add_argument("--site", default="resid_pre",
                   help="resid_pre, attn_out, mlp_out (layer x position), z (layer x head), z_pos "
                        "(head x position), pattern, q, k, v (layer x head), resid_final; sae (the "
                        "features of --sae at its hook, largest effect first)")
    s.add_argument("--sae", metavar="DIR", help="--site sae: an SAE folder (the lab's or SAELens's)")
    s.add_argument("--method", default="exact",
                   help="exact (patched runs), attribution (one backward pass), or both side by side "
                        "with their correlation")
    add_at_step(s)
    add_json(s)
    s.set_defaults(handler=patch)


def pair_from_args(lab: Any, args: argparse.Namespace) -> Any:
    """The pair the options give: all four texts, a named pair, or the model's default."""
    from tui_lab.core.analysis.patching.patch_pair import PatchError, make_pair, ready_pair

    given = [name for name in PAIR_OPTIONS if getattr(args, name) is not None]
    if given and args.pair is not None:
        raise PatchError("give either --pair or --clean/--corrupt/--answer/--wrong, not both")
    if given:
        missing = [f"--{name}" for name in PAIR_OPTIONS if name not in given]
        if missing:
            raise PatchError(f"a pair needs --clean, --corrupt, --answer and --wrong (missing {', '.join(missing)})")
        return make_pair(lab, args.clean, args.corrupt, args.answer, args.wrong, getattr(args, "target", None))
    if getattr(args, "target", None) is not None:
        raise PatchError("--target goes with --clean/--corrupt/--answer/--wrong (a ready-made pair has its own)")
    return ready_pair(lab, args.pair)


def patch(args: argparse.Namespace) -> int:
    """Patch every cell of the site and print the grid (0: corrupted run, 1: clean run)."""
    from tui_lab.core.analysis.patching.activation_patching import activation_patch, site_named
    from tui_lab.core.analysis.patching.attribution_patching import attribution_patch, correlation
    from tui_lab.core.analysis.patching.patch_pair import PatchError
    from tui_lab.core.opening.model_in_hand import hooked

    if args.method not in ("exact", "attribution", "both"):
        raise PatchError(f"unknown method {args.method!r}: exact, attribution or both")
    if (args.site == "sae") != (args.sae is not None):
        raise PatchError("--site sae and --sae DIR go together")
    if args.site == "sae" and args.method != "exact":
        raise PatchError("--site sae is patched exactly (--method exact)")
    if args.site != "sae":
        site_named(args.site)
    lab = hooked(load_target(args, "cpu", args.at_step))
    pair = pair_from_args(lab, args)
    results = []
    if args.site == "sae":
        from tui_lab.core.analysis.patching.feature_patching import feature_patch
        from tui_lab.core.sae.source import open_sae

        results.append(feature_patch(lab, pair, open_sae(args.sae)))
    elif args.method in ("exact", "both"):
        results.append(activation_patch(lab, pair, args.site, stack=args.stack))
    if args.method in ("attribution", "both") and args.site != "sae":
        results.append(attribution_patch(lab, pair, args.site, stack=args.stack))
    which = "model" if args.model is not None else "run"
    if args.json:
        head = {which: target_name(args), "pair": pair.name}
        if len(results) == 1:
            emit_json({**head, **results[0].to_dict()})
        else:
            emit_json({**head, "exact": results[0].to_dict(), "attribution": results[1].to_dict(),
                       "correlation": correlation(*results)})
        return 0
    for result in results:
        print(f"{target_name(args)}: {result.method} patching of {result.site} ({result.direction}); "
              f"logit difference clean {result.clean:.3f}, corrupted {result.corrupt:.3f}")
        print_grid(result.rows, result.cols, result.values)
    if len(results) == 2:
        print(f"correlation of attribution with exact patching over {len(results[0].rows) * len(results[0].cols)} "
              f"cells: {correlation(*results):.3f}")
    return 0


def print_grid(rows: list[str], cols: list[str], values: list[list[float]]) -> None:
    """Rows of numbers under the column labels (tokens shown as they are)."""
    left = max(len(r) for r in rows)
    width = max(6, *(len(c) + 1 for c in cols))
    print(" " * left + "".join(f"{c[:width - 1]:>{width}}" for c in cols))
    for label, row in zip(rows, values, strict=True):
        print(f"{label:<{left}}" + "".join(f"{v:>{width}.2f}" for v in row))
