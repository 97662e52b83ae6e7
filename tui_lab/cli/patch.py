"""`tfx-lab patch (--run DIR | --model SOURCE)`: activation patching (or attribution patching)
of one site over a clean / corrupted pair, as a grid of normalised logit differences."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .shared import (
    Subparsers,
    add_at_step,
    add_json,
    add_pair,
    add_run_or_model,
    emit_json,
    load_target,
    target_name,
)

if TYPE_CHECKING:
    from tui_lab.core.verbs.patch import Request


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("patch", help="activation patching: which activations carry the answer")
    add_run_or_model(s)
    add_pair(s)
    s.add_argument("--pair", metavar="NAME",
                   help="a ready-made pair instead: ioi (opened models), translation (opened "
                        "translators), the run's task (induction, induction-key, copy, ...)")
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


def request_from_args(args: argparse.Namespace) -> Request:
    """The patch request the options give (checked: refused in one line before any loading)."""
    from tui_lab.core.verbs.patch import Request

    return Request(site=args.site, method=args.method, pair=args.pair, clean=args.clean, corrupt=args.corrupt,
                   answer=args.answer, wrong=args.wrong, target=args.target,
                   stack=args.stack, sae=args.sae)


def patch(args: argparse.Namespace) -> int:
    """Patch every cell of the site and print the grid (0: corrupted run, 1: clean run)."""
    from tui_lab.core.verbs.patch import run

    request = request_from_args(args)
    result = run(request, load_target(args, "cpu", args.at_step))
    which = "model" if args.model is not None else "run"
    if args.json:
        emit_json({which: target_name(args), **result.to_json()})
        return 0
    for grid in result.grids:
        print(f"{target_name(args)}: {grid.method} patching of {grid.site} ({grid.direction}); "
              f"logit difference clean {grid.clean:.3f}, corrupted {grid.corrupt:.3f}")
        print_grid(grid.rows, grid.cols, grid.values)
    if result.correlation is not None:
        cells = len(result.grids[0].rows) * len(result.grids[0].cols)
        print(f"correlation of attribution with exact patching over {cells} cells: {result.correlation:.3f}")
    return 0


def print_grid(rows: list[str], cols: list[str], values: list[list[float]]) -> None:
    """Rows of numbers under the column labels (tokens shown as they are)."""
    left = max(len(r) for r in rows)
    width = max(6, *(len(c) + 1 for c in cols))
    print(" " * left + "".join(f"{c[:width - 1]:>{width}}" for c in cols))
    for label, row in zip(rows, values, strict=True):
        print(f"{label:<{left}}" + "".join(f"{v:>{width}.2f}" for v in row))
