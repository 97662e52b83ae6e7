"""Save the head atlas of a trained ``induction`` run, with its score curves, as an SVG at 120x40.

    python scripts/atlas_screenshot.py [--run RUN_DIR] [--out screenshots/atlas.svg]
        [--input qwertyuiopqwer]

Without ``--run`` it trains the shipped ``induction`` preset first (about two
minutes on a laptop CPU; history snapshots on, as the preset has them) in a
temporary folder. It opens the lab on the run, decodes a prompt in which a
random stretch of letters repeats (the atlas shows once there is a decode;
the heads are scored on the task's own probe, not on the prompt), shows the
Attention pane's all-heads view of layer 2 (``l`` ``a``), waits until every history snapshot
is scored for the curves, and saves the screen. A PNG is written too when
``rsvg-convert`` exists.
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

PROMPT = "qwertyuiopqwer"  # "qwertyuiop" then its start again: an induction head continues "tyuiop"



async def make(run: Path, out: Path, prompt: str) -> Path:
    """Open the lab on ``run``, show the atlas with its curves, write ``out``."""
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.attention.attention_pane import AttentionPane
    from tui_lab.ui.widgets.head_atlas import HeadAtlas

    app = LabApp(preset="induction", run_dir=str(run))
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None and app.current_run is not None, 180, "the run")
        await pilot.press("3")
        app.query_one("#decode-input", Input).value = prompt
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.last_decode is not None, 60, "the decode")
        await pilot.press("4")
        pane = app.query_one(AttentionPane)
        await wait_for(pilot, lambda: pane.result is not None, 30, "the attention")
        await pilot.press("l", "a")  # layer 2, where the induction heads are, all heads at once
        atlas = pane.query_one(HeadAtlas)
        await wait_for(
            pilot,
            lambda: atlas.heads is not None and atlas.curves is not None and atlas.progress is None,
            600,
            "the atlas and its score curves",
        )
        if atlas.error:
            raise SystemExit(f"atlas_screenshot: the atlas says {atlas.error}")
        await app.workers.wait_for_complete()
        for field in app.query(Input):
            field.cursor_blink = False
        app.clear_notifications()
        await pilot.pause(0.5)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(app.export_screenshot(title="tfx-lab · head atlas"), encoding="utf-8")
        print(f"decoded {app.last_decode.result.input!r} -> {app.last_decode.result.output!r}")
        for h in atlas.heads:
            print(f"  {h.label:18} {h.best:10} {h.best_score:.2f}")
    return out


def train(folder: Path) -> Path:
    """Train the shipped induction preset into ``folder`` (through the CLI, as a user would)."""
    exe = Path(sys.executable).with_name("tfx-lab")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tui_lab.cli"]
    subprocess.run([*cmd, "train", "--preset", "induction", "--out", str(folder)], check=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=None, help="a trained induction run (default: train one)")
    parser.add_argument("--out", type=Path, default=Path("screenshots") / "atlas.svg")
    parser.add_argument("--input", default=PROMPT, help="the prompt decoded before the atlas shows")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfx-lab-atlas-") as scratch:
        run = args.run.resolve() if args.run else train(Path(scratch) / "induction")
        svg = asyncio.run(make(run, args.out.resolve(), args.input))
    print_with_png(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
