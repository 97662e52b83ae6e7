"""``screenshots/circuit.svg`` (and ``.png``): the Circuit pane's attribution graph on the
induction-mlp run, a feature node selected; ``circuit-qk.svg``: the answer's strongest
earlier-position edge, the heads carrying it and the top head's QK tracing (``a``).

    python scripts/circuit_screenshot.py [--run RUN_DIR] [--transcoders DIR] [--input TEXT]
        [--out screenshots/circuit.svg]

The run defaults to the shipped ``tests/data/induction-mlp-run``; without ``--transcoders`` it
trains a set as ``tfx-lab transcoder train --run RUN --seed 0`` does by default. It opens the lab
on the run, shows the Circuit pane (9), names the set (``t``), types a repeated-prefix prompt
(``/``), traces it (enter), moves the cursor down from the top logit to the first feature node
and saves the SVG; then back on the answer it presses ``a`` and saves ``circuit-qk.svg`` beside
it. A PNG is written too when ``rsvg-convert`` exists.
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
PROMPT = "qwhkzpfmqwhkz"


async def make(run: Path, transcoders: Path, out: Path, prompt: str) -> Path:
    from tui_lab.ui import pane_registry
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.circuit.circuit_pane import CircuitPane

    app = LabApp(preset="induction-mlp")
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None, 180, "torch")
        hold_run(app, run)
        await pilot.press(pane_registry.spec("circuit").key)
        pane = app.query_one(CircuitPane)
        await wait_for(pilot, lambda: pane.display, 30, "the Circuit pane")
        app.query_one("#circuit-folder", Input).value = str(transcoders)
        await pilot.press("slash")
        app.query_one("#circuit-prompt", Input).value = prompt
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.view.graph is not None and not pane.running, 600, "the graph")
        for _ in range(4):  # from the top logit down to the first row of features
            node = pane.view.node()
            if node is not None and node.kind.value == "feature":
                break
            await pilot.press("down")
        await save_svg(app, pilot, out, "tfx-lab · circuit")
        node = pane.view.node()
        print(f"cursor on {node.kind.value if node else None} {node.label if node else ''}", file=sys.stderr)
        for _ in range(4):  # back up to the top logit: the answer
            await pilot.press("up")
        await pilot.press("a")
        await wait_for(pilot, lambda: pane.view.carriers is not None and not pane.running, 120, "the QK tracing")
        await save_svg(app, pilot, out.with_name("circuit-qk.svg"), "tfx-lab · circuit, QK tracing")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=RUN, help="an induction-mlp run (default: the shipped one)")
    parser.add_argument("--transcoders", type=Path, default=None, help="its transcoder set (default: train one)")
    parser.add_argument("--input", default=PROMPT, help="the prompt traced")
    parser.add_argument("--out", type=Path, default=Path("screenshots") / "circuit.svg")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfx-lab-circuit-") as scratch:
        transcoders = args.transcoders.resolve() if args.transcoders else Path(scratch) / "tc"
        if args.transcoders is None:
            tfx("transcoder", "train", "--run", str(args.run.resolve()), "--seed", "0", "--out", str(transcoders))
        svg = asyncio.run(make(args.run.resolve(), transcoders, args.out.resolve(), args.input))
    print_with_png(svg)
    print_with_png(svg.with_name("circuit-qk.svg"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
