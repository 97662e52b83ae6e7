"""Save the Patch pane on a trained ``induction`` run: the ``z`` heatmap, and its history view
(each head's patching effect over training beside the atlas's curves), as SVGs at 120x40.

    python scripts/patch_screenshots.py [--run RUN_DIR] [--out screenshots]

Without ``--run`` it trains the shipped ``induction`` preset first (a few minutes on a laptop
CPU; history snapshots on, as the preset has them) in a temporary folder. It opens the lab on
the run, shows the Patch pane (7), cycles the site to ``z`` (``s`` three times), patches the
task's ready-made pair (``r``), puts the cursor on layer 1's strongest head, saves
``patch-z.svg``; then ``t`` works the grid out at every snapshot and saves
``patch-history.svg``. A PNG is written beside each when ``rsvg-convert`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from shot_tools import SIZE, print_with_png, wait_for
from textual.widgets import Input


async def make(run: Path, out: Path) -> list[Path]:
    """Open the lab on ``run``, patch ``z``, save the heatmap and the history view into ``out``."""
    from tui_lab.ui import pane_registry
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.patch.patch_pane import PatchPane

    app = LabApp(preset="induction", run_dir=str(run))
    app.animation_level = "none"
    saved = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None and app.current_run is not None, 180, "the run")
        await pilot.press(pane_registry.spec("patch").key)
        pane = app.query_one(PatchPane)
        await pilot.press("s", "s", "s", "r")
        await wait_for(pilot, lambda: pane.view.shown is not None and not pane.running, 300, "z")
        z = pane.view.shown
        best = max(range(len(z.cols)), key=lambda c: z.values[1][c])
        await pilot.press("down", *["right"] * best)  # layer 1's strongest head
        saved.append(await _save(app, pilot, out / "patch-z.svg", "tfx-lab · patching z"))
        await pilot.press("t")
        await wait_for(pilot, lambda: pane.view.history is not None and not pane.running, 600, "history")
        saved.append(await _save(app, pilot, out / "patch-history.svg", "tfx-lab · patching over training"))
        for r, row in enumerate(z.rows):
            print(row, " ".join(f"{c}={v:+.2f}" for c, v in zip(z.cols, z.values[r], strict=True)))
    return saved


async def _save(app: object, pilot: object, svg: Path, title: str) -> Path:
    await app.workers.wait_for_complete()  # type: ignore[attr-defined]
    for field in app.query(Input):  # type: ignore[attr-defined]
        field.cursor_blink = False
    app.clear_notifications()  # type: ignore[attr-defined]
    await pilot.pause(0.5)  # type: ignore[attr-defined]
    svg.parent.mkdir(parents=True, exist_ok=True)
    svg.write_text(app.export_screenshot(title=title), encoding="utf-8")  # type: ignore[attr-defined]
    return svg


def train(folder: Path) -> Path:
    """Train the shipped induction preset into ``folder`` (through the CLI, as a user would)."""
    exe = Path(sys.executable).with_name("tfx-lab")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tui_lab.cli"]
    subprocess.run([*cmd, "train", "--preset", "induction", "--out", str(folder)], check=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=None, help="a trained induction run with history (default: train one)")
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfx-lab-patch-") as scratch:
        run = args.run.resolve() if args.run else train(Path(scratch) / "induction")
        for svg in asyncio.run(make(run, args.out.resolve())):
            print_with_png(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
