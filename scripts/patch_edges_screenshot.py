"""``screenshots/patch-edges.svg`` (and ``.png``): the Patch pane's edges view on the induction run.

    python scripts/patch_edges_screenshot.py [--run RUN_DIR] [--value-pair] [--out screenshots/patch-edges.svg]

The run defaults to the shipped ``tests/data/induction-run`` (``screenshots/patch-edges-history.svg``
is this script's picture of a run trained with ``tfx-lab train --preset induction``, which keeps
history). It opens the lab on the run, shows the Patch pane (7) (``--value-pair`` picks the plain
induction pair first: ``e``, the first ready pair; the edges' default is induction-key); then the edges view (``g``: every edge scored by EAP-IG on the pair, the
top ones, the faithfulness curve and, on a run with history, the final circuit over it), then
the known-circuit check (``k``), and saves the SVG. A PNG is written too when ``rsvg-convert``
exists.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from shot_tools import SIZE, hold_run, print_with_png, save_svg, wait_for

RUN = Path(__file__).resolve().parent.parent / "tests" / "data" / "induction-run"


async def make(run: Path, out: Path, value_pair: bool = False) -> Path:
    from tui_lab.ui import pane_registry
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.patch.edges_widget import EdgesPanel
    from tui_lab.ui.panes.patch.patch_pane import PatchPane

    app = LabApp(preset="induction")
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None, 180, "torch")
        hold_run(app, run)
        await pilot.press(pane_registry.spec("patch").key)
        pane = app.query_one(PatchPane)
        await wait_for(pilot, lambda: pane.display, 30, "the Patch pane")
        edges = app.query_one(EdgesPanel)
        if value_pair:  # the pair form: the first ready pair, induction
            await pilot.press("e", "enter")
            await pilot.pause(0.5)
            await wait_for(pilot, lambda: not pane.running and pane.pair is not None, 600, "the pair")
        await pilot.press("g")
        await wait_for(pilot, lambda: edges.view.result is not None and not edges.running, 600, "the edges")
        await pilot.press("k")
        await pilot.pause(0.5)
        await wait_for(pilot, lambda: not edges.running, 600, "the known-circuit check")
        await save_svg(app, pilot, out, "tfx-lab · patching edges")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=RUN, help="a trained induction run (default: the shipped one)")
    parser.add_argument("--value-pair", action="store_true", help="score the plain induction pair, not induction-key")
    parser.add_argument("--out", type=Path, default=Path("screenshots") / "patch-edges.svg")
    args = parser.parse_args(argv)
    print_with_png(asyncio.run(make(args.run.resolve(), args.out.resolve(), args.value_pair)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
