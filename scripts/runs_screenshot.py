"""Save the Runs pane's overlay of a sweep as an SVG: one mean curve per arm, at 120x40.

    python scripts/runs_screenshot.py SWEEP_DIR [--out screenshots/runs-ln-warmup.svg]
        [--metric exact_match|val_loss|train_loss] [--log]

It opens the lab on the sweep folder as its runs directory (no torch), marks
one run of each arm (a sweep's run stands for its arm's mean curve) and saves
the screen the way ``f12`` does. A PNG is written too when ``rsvg-convert`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from shot_tools import SIZE, print_with_png


async def make(sweep: Path, out: Path, metric: str, log: bool) -> Path:
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.widgets.run_table import RunTable

    app = LabApp(runs_dir=str(sweep), load_core=False)
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        deadline = time.monotonic() + 30
        while not (app.pane("runs") is not None and app.pane("runs").shown):
            if time.monotonic() > deadline:
                raise SystemExit("runs_screenshot: no runs read")
            await pilot.pause(0.1)
        pane = app.pane("runs")
        seen: set[str | None] = set()
        for row in list(pane.shown):
            if row.arm in seen:
                continue
            seen.add(row.arm)
            pane.query_one(RunTable).move_to(row.key)
            await pilot.pause()
            await pilot.press("space")
        while pane.overlay.metric != metric:
            await pilot.press("m")
        if log != pane.overlay.log_scale:
            await pilot.press("l")
        pane.query_one(RunTable).move_to(pane.shown[0].key)
        await app.workers.wait_for_complete()
        await pilot.pause(1.0)
        app.clear_notifications()
        app.core_state = "torch not loaded (the Runs pane reads folders only)"
        app._update_status()
        await pilot.pause()
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--metric", default="exact_match")
    parser.add_argument("--log", action="store_true")
    args = parser.parse_args(argv)
    out = args.out or Path("screenshots") / f"runs-{args.sweep.resolve().name}.svg"
    svg = asyncio.run(make(args.sweep.resolve(), out.resolve(), args.metric, args.log))
    print_with_png(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
