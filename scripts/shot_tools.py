"""What the screenshot scripts share: the screen size, waiting on a pilot, and the PNG beside an SVG."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

SIZE = (120, 40)  # the README's screenshots are all 120x40


async def wait_for(pilot: Pilot, predicate: Callable[[], object], timeout: float, what: str,
                   script: str = "screenshots") -> None:
    """Pause the pilot until ``predicate()`` holds; exit naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"{script}: timed out waiting for {what}")
        await pilot.pause(0.1)


def print_with_png(svg: Path) -> None:
    """Print the SVG's path, and write and print a PNG beside it where ``rsvg-convert`` exists."""
    print(svg)
    if shutil.which("rsvg-convert"):
        png = svg.with_suffix(".png")
        subprocess.run(["rsvg-convert", "-o", str(png)], input=_for_rsvg(svg.read_text(encoding="utf-8")),
                       check=True, text=True)
        print(png)


def _for_rsvg(svg: str) -> str:
    """Rich's SVG with plain spaces kept as written: rsvg drops the no-break space that opens
    a text run (" 100%" after a token "3" drew as "3100%"), and collapses plain ones unless told."""
    return svg.replace("&#160;", " ").replace('<svg class="rich-terminal"', '<svg xml:space="preserve" class="rich-terminal"', 1)


async def save_svg(app: object, pilot: Pilot, svg: Path, title: str) -> Path:
    """Wait for the app's workers, stop the cursors blinking, clear notifications, write ``svg``."""
    from textual.widgets import Input

    await app.workers.wait_for_complete()  # type: ignore[attr-defined]
    for field in app.query(Input):  # type: ignore[attr-defined]
        field.cursor_blink = False
    app.clear_notifications()  # type: ignore[attr-defined]
    await pilot.pause(0.5)
    svg.parent.mkdir(parents=True, exist_ok=True)
    svg.write_text(app.export_screenshot(title=title), encoding="utf-8")  # type: ignore[attr-defined]
    return svg


def tfx(*args: str) -> None:
    """Run ``tfx-lab ARGS`` as a user would (the venv's script, else ``python -m tui_lab.cli``)."""
    import sys

    exe = Path(sys.executable).with_name("tfx-lab")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tui_lab.cli"]
    subprocess.run([*cmd, *args], check=True)


def hold_run(app: object, run_dir: Path) -> None:
    """Put ``run_dir``'s model in the lab's hands as a run opened for reading (it keeps its
    folder, so its history travels), without the Train pane's restore: a run shipped without
    an optimizer state (tests/data/*) is not restored there."""
    from tui_lab.core.opening.from_run import load_for_inference

    app.state.current_run = load_for_inference(run_dir, "cpu")  # type: ignore[attr-defined]
