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
        subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True)
        print(png)
