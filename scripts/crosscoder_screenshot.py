"""``screenshots/features-crosscoder.svg`` (and ``.png``): the Features pane's crosscoder diff
over two history snapshots of the induction-mlp run.

    python scripts/crosscoder_screenshot.py [--run RUN_DIR] [--crosscoder DIR]
        [--out screenshots/features-crosscoder.svg]

The run defaults to the shipped ``tests/data/induction-mlp-run`` (snapshots at steps 100, 400
and 1,200); without ``--crosscoder`` it trains one as ``tfx-lab crosscoder train --run RUN
--seed 0`` does by default (an early snapshot and the last). It opens the lab on the run,
shows the Features pane (8), the diff view (``c``), names the crosscoder's folder in the
question (``e``), waits for the lists (features new at the later step first), types a
sequence twice over (``/``: each token's features, the crosscoder's and each step's alone),
puts the cursor on the first feature new at the later step that fires in the repeat, and
saves the SVG. A PNG is written too when ``rsvg-convert`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from shot_tools import SIZE, hold_run, print_with_png, save_svg, tfx, wait_for
from textual.widgets import Input

RUN = Path(__file__).resolve().parent.parent / "tests" / "data" / "induction-mlp-run"
TYPED = "pfBnlgajACKvru" * 2  # a sequence, then its repeat: where induction reads back


async def make(run: Path, crosscoder: Path, out: Path) -> Path:
    from tui_lab.ui import pane_registry
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.features.crosscoder_diff import CrosscoderDiff
    from tui_lab.ui.panes.features.cursor_list import CursorList

    app = LabApp(preset="induction-mlp")
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None, 180, "torch")
        hold_run(app, run)
        await pilot.press(pane_registry.spec("features").key)
        await pilot.pause(0.5)
        await pilot.press("c")
        diff = app.query_one(CrosscoderDiff)
        await wait_for(pilot, lambda: diff.display and app.query_one("#xc-ask", Input).has_focus, 30, "the question")
        app.query_one("#xc-ask", Input).value = str(crosscoder)
        await pilot.press("enter")
        await wait_for(pilot, lambda: diff.ready is not None and not diff.busy, 600, "the crosscoder's lists")
        await pilot.press("slash", *TYPED, "enter")
        tokens = app.query_one("#xc-tokens", CursorList)
        await wait_for(pilot, lambda: tokens.display and tokens.has_focus, 60, "the typed text's features")
        half = len(TYPED) // 2
        repeat = [i for i, r in enumerate(diff.token_rows) if r.t >= half and diff.kinds.get(r.feature) == "b_only"]
        if repeat:
            tokens.show(tokens.lines, repeat[0])
            await pilot.pause(0.2)
        await save_svg(app, pilot, out, "tfx-lab · crosscoder diff")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=RUN, help="a run with history (default: the shipped induction-mlp)")
    parser.add_argument("--crosscoder", type=Path, default=None, help="its crosscoder folder (default: train one)")
    parser.add_argument("--out", type=Path, default=Path("screenshots") / "features-crosscoder.svg")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfx-lab-crosscoder-") as scratch:
        crosscoder = args.crosscoder.resolve() if args.crosscoder else Path(scratch) / "xc"
        if args.crosscoder is None:
            tfx("crosscoder", "train", "--run", str(args.run.resolve()), "--seed", "0", "--out", str(crosscoder))
        svg = asyncio.run(make(args.run.resolve(), crosscoder, args.out.resolve()))
    print_with_png(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
