"""Regenerate ``screenshots/*.svg``: the lab driven like a user, at 120x40.

    python scripts/screenshots.py [--preset copy] [--out screenshots] [--max-seconds 300]

It opens the lab on the preset, trains it in the Train pane (until the preset
stops, e.g. at its target accuracy), decodes ``31415``, and saves one SVG per
pane plus the help screen. Runs go to a temporary folder; nothing else changes.
Then (unless ``--no-views``) the VIEWS scripts draw the Circuit, Patch edges, tuned
lens, Probes and crosscoder views from trained runs, an SVG and a PNG each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shot_tools import SIZE, wait_for
from textual.pilot import Pilot
from textual.widgets import Input


async def _settle(pilot: Pilot) -> None:
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause(0.4)
    for field in app.query(Input):
        field.cursor_blink = False
    app.clear_notifications()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def make(preset: str, out: Path, max_seconds: float, decode_input: str) -> list[Path]:
    """Drive the lab and write the SVGs; returns their paths."""
    from tui_lab.ui.app import LabApp

    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    home = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="tfx-lab-shots-") as scratch:
        os.chdir(scratch)  # the run folder shows as runs/<preset>-<time>
        try:
            return await _drive(
                LabApp(preset=preset, runs_dir="runs"), out, max_seconds, decode_input
            )
        finally:
            os.chdir(home)


async def _drive(app: Any, out: Path, max_seconds: float, decode_input: str) -> list[Path]:
    from tui_lab.ui.panes.attention.attention_pane import AttentionPane
    from tui_lab.ui.panes.train.train_pane import TrainPane

    written: list[Path] = []
    app.animation_level = "none"

    def save(name: str) -> None:
        path = out / f"{name}.svg"
        path.write_text(app.export_screenshot(title=f"tfx-lab · {name}"), encoding="utf-8")
        written.append(path)
        print(f"wrote {path}", file=sys.stderr)

    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None, 120, "torch")
        await _settle(pilot)
        save("build")
        await pilot.press("2", "space")
        train = app.query_one(TrainPane)
        started = time.monotonic()
        await wait_for(pilot, lambda: train.state in ("running", "done"), 120, "training to start")
        while train.state != "done" and time.monotonic() - started < max_seconds:
            await pilot.pause(0.5)
        if train.state != "done":
            await pilot.press("s")
            await wait_for(pilot, lambda: train.state == "done", 60, "training to stop")
        await pilot.pause(0.6)
        await _settle(pilot)
        save("train")
        await pilot.press("3")
        field = app.query_one("#decode-input", Input)
        field.value = decode_input
        await pilot.press("enter")
        await _settle(pilot)
        save("decode")
        await pilot.press("4", "k", "k", "down", "down", "w")
        attention = app.query_one(AttentionPane)
        await wait_for(pilot, lambda: attention.projections is not None, 60, "the walkthrough")
        await _settle(pilot)
        save("attention")
        await pilot.press("5")
        await _settle(pilot)
        save("params")
        await pilot.press("question_mark")
        await _settle(pilot)
        save("help")
        await pilot.press("escape")
        app.query_one(TrainPane).stop_training()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/screenshots.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--preset", default="copy", help="preset to train (default: copy)")
    parser.add_argument(
        "--out", default="screenshots", help="folder for the SVGs (default: screenshots)"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=300.0, help="stop training after this long"
    )
    parser.add_argument("--input", default="31415", help="what to decode (default: 31415)")
    parser.add_argument("--no-views", action="store_true",
                        help="skip the views drawn from the lab's trained runs (VIEWS)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    asyncio.run(make(args.preset, Path(args.out), args.max_seconds, args.input))
    if not args.no_views:
        views(Path(args.out))
    return 0


# The views drawn from the lab's own trained runs (tests/data, or a run each script trains,
# seeded), one script each: (script, the SVG it writes).
VIEWS = (
    ("circuit_screenshot", "circuit.svg"),
    ("patch_edges_screenshot", "patch-edges.svg"),
    ("decode_lens_screenshot", "decode-tuned-lens.svg"),
    ("probes_screenshot", "probes.svg"),
    ("crosscoder_screenshot", "features-crosscoder.svg"),
)


def views(out: Path) -> None:
    """Each of VIEWS in its own process (each opens its own lab), a PNG beside each SVG."""
    import subprocess

    here = Path(__file__).resolve().parent
    for script, svg in VIEWS:
        subprocess.run([sys.executable, str(here / f"{script}.py"), "--out", str(out.resolve() / svg)], check=True)


if __name__ == "__main__":
    raise SystemExit(main())
