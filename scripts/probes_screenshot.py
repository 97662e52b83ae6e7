"""``screenshots/probes.svg`` (and ``.png``): the Probes screen on an addition run, with its
probes over training as a layer x step heatmap.

    python scripts/probes_screenshot.py [--run RUN_DIR] [--out screenshots/probes.svg]

Without ``--run`` it trains the shipped ``addition`` preset for 1,500 steps (seed 0; history
snapshots on, as the preset has them) in a temporary folder (a few minutes on a laptop CPU).
It opens the lab on the run, shows the Attention pane (4), opens the Probes screen (``v``),
waits for the probe table of the model in hand, runs the probes at every snapshot (``t``) and
saves the SVG. A PNG is written too when ``rsvg-convert`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from shot_tools import SIZE, print_with_png, save_svg, tfx, wait_for


async def make(run: Path, out: Path) -> Path:
    import torch

    from tui_lab.ui import pane_registry
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.screens.probes_screen import ProbesScreen

    torch.manual_seed(0)
    app = LabApp(preset="addition", run_dir=str(run))
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None and app.current_run is not None, 300, "the run")
        await pilot.press(pane_registry.spec("attention").key)
        await pilot.pause(0.5)
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, ProbesScreen), 60, "the Probes screen")
        screen = app.screen
        assert isinstance(screen, ProbesScreen)
        await wait_for(pilot, lambda: screen.table is not None, 600, "the probe table")
        await pilot.press("t")
        await wait_for(pilot, lambda: screen.history is not None and not screen.busy, 600, "the probes over training")
        await save_svg(app, pilot, out, "tfx-lab · probes")
        from tui_lab.ui.screens.probes_view import history_line

        assert screen.history is not None and screen.table is not None
        print(screen.table.classes, history_line(screen.history), file=sys.stderr)
        for grid in (screen.history.readable, screen.history.causal):
            for row in grid.values if grid is not None else []:
                print(" ".join("  -  " if v is None else f"{v:.3f}" for v in row), file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=None, help="an addition run with history (default: train one)")
    parser.add_argument("--out", type=Path, default=Path("screenshots") / "probes.svg")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfx-lab-probes-") as scratch:
        run = args.run.resolve() if args.run else Path(scratch) / "addition"
        if args.run is None:
            tfx("train", "--preset", "addition", "--steps", "1500", "--seed", "0", "--out", str(run))
        svg = asyncio.run(make(run, args.out.resolve()))
    print_with_png(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
