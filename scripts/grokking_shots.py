"""Screenshots of a grokking run: the Train pane's charts, and the Fourier view before and after.

    python scripts/grokking_shots.py RUN_DIR [--out screenshots]

RUN_DIR is a finished ``tfx-lab train --preset modular-addition`` folder. The
lab opens it (``--run``), shows the Train pane (loss, both accuracies and the
weight norm), then ``f``: the spectrum at the snapshot of the step where
training accuracy first reached 100% (memorised, not yet generalised), and
at the run's end. SVGs, and PNGs beside them where ``rsvg-convert`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from shot_tools import SIZE, print_with_png, wait_for
from textual.pilot import Pilot


async def _settle(pilot: Pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause(0.5)
    pilot.app.clear_notifications()
    await pilot.pause()


async def make(run_dir: Path, out: Path) -> list[Path]:
    """Drive the lab over ``run_dir`` and write the three SVGs; returns their paths."""
    from tui_lab.core.runs.curves import first_step_at, read_curves
    from tui_lab.core.runs.snapshots import list_snapshots
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.train.train_pane import TrainPane
    from tui_lab.ui.screens.fourier_screen import FourierScreen
    from tui_lab.ui.widgets.fourier_view import FourierView

    solved = first_step_at(read_curves(run_dir).train_accuracy, 1.0)
    steps = list_snapshots(run_dir)
    if solved is None or solved not in steps:
        raise SystemExit(f"{run_dir}: no snapshot at the step training accuracy reached 100%")
    out.mkdir(parents=True, exist_ok=True)
    app = LabApp(run_dir=str(run_dir))
    paths = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None, 300, "torch to load", "grokking_shots")
        await pilot.press("2")
        pane = app.query_one(TrainPane)
        await wait_for(pilot, lambda: pane.run is not None and len(pane.history) > 0, 120,
                       "the run to open", "grokking_shots")
        await _settle(pilot)
        paths.append(Path(app.save_screenshot(str(out / "grokking-train.svg"))))
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FourierScreen), 30, "f", "grokking_shots")
        view = app.screen.query_one(FourierView)
        await pilot.press("left_curly_bracket")  # the first snapshot, then on to the solved step
        for _ in range(steps.index(solved)):
            await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: f"step {solved:,} of" in str(view.render()), 60, "the snapshot",
                       "grokking_shots")
        await _settle(pilot)
        paths.append(Path(app.save_screenshot(str(out / "grokking-fourier-before.svg"))))
        await pilot.press("right_curly_bracket")  # the last snapshot: the run's end
        await wait_for(pilot, lambda: f"step {steps[-1]:,} of" in str(view.render()), 60, "the end",
                       "grokking_shots")
        await _settle(pilot)
        paths.append(Path(app.save_screenshot(str(out / "grokking-fourier-after.svg"))))
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, default=Path("screenshots"))
    args = p.parse_args()
    for svg in asyncio.run(make(args.run_dir.resolve(), args.out)):
        print_with_png(svg)


if __name__ == "__main__":
    main()
