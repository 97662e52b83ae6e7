"""Save the basics screen's four views (positions, masks, scaling, schedule) as SVGs at 120x40.

    python scripts/basics_screenshots.py [--run RUN_DIR | --preset P] [--out-dir screenshots]

By default the lab opens the committed ``tests/data/learned-copy`` run (a copy
model trained to 99.4% exact match), decodes ``31415`` so the masks view puts
that input beside the task's examples, opens the basics screen (``b``) and
saves each view (``p`` ``m`` ``s`` ``r``) as ``basics-<view>.svg``, with a PNG
beside it where ``rsvg-convert`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from shot_tools import SIZE, print_with_png, wait_for
from textual.widgets import Input

ROOT = Path(__file__).resolve().parents[1]
VIEWS = {"p": "positions", "m": "masks", "s": "scaling", "r": "schedule"}


async def make(run: str | None, preset: str | None, out_dir: Path, prompt: str) -> list[Path]:
    """Open the lab, show each basics view, write one SVG per view."""
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.screens.basics.basics_screen import BasicsScreen

    app = LabApp(preset=preset, run_dir=run)
    app.animation_level = "none"
    written = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None, 180, "torch", "basics_screenshots")
        if run:
            await wait_for(pilot, lambda: app.current_run is not None, 180, "the run", "basics_screenshots")
            await pilot.press("3")
            app.query_one("#decode-input", Input).value = prompt
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.last_decode is not None, 60, "the decode", "basics_screenshots")
        await pilot.press("escape", "b")
        screen = app.screen
        assert isinstance(screen, BasicsScreen)
        await wait_for(pilot, lambda: screen.data is not None, 120, "the pictures", "basics_screenshots")
        for field in app.query(Input):
            field.cursor_blink = False
        out_dir.mkdir(parents=True, exist_ok=True)
        for key, view in VIEWS.items():
            await pilot.press(key)
            app.clear_notifications()
            await pilot.pause(0.5)
            out = out_dir / f"basics-{view}.svg"
            out.write_text(app.export_screenshot(title=f"tfx-lab · basics: {view}"), encoding="utf-8")
            written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = p.add_mutually_exclusive_group()
    group.add_argument("--run", help="run folder (default: tests/data/learned-copy)")
    group.add_argument("--preset", help="a preset instead: its model untrained")
    p.add_argument("--out-dir", type=Path, default=ROOT / "screenshots")
    p.add_argument("--input", default="31415", help="the input decoded first (with --run)")
    args = p.parse_args(argv)
    run = None if args.preset else (args.run or str(ROOT / "tests" / "data" / "learned-copy"))
    for svg in asyncio.run(make(run, args.preset, args.out_dir, args.input)):
        print_with_png(svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
