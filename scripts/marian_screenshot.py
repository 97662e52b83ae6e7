"""``screenshots/marian-cross-attention.svg`` (and ``.png``): the Attention pane's cross view on a translator.

    python scripts/marian_screenshot.py [--folder DIR] [--out screenshots]

Real weights cannot be fetched here, so the translator is a random-weight
``MarianMTModel`` at the tests' small shape with their SentencePiece tokenizer
(``bench/hf_factory.py``; ``transformers`` is a test-only dependency),
written by ``save_pretrained``. The lab opens the folder with ``--model``,
translates a sentence and shows decoder layer 1's cross attention: target pieces
down the side, source pieces along the top. The PNG needs ``rsvg-convert``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from shot_tools import print_with_png

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The cat sat on the mat."


def marian_folder(folder: Path) -> Path:
    """A random-weight Marian folder (written once; reused if present)."""
    if not (folder / "model.safetensors").is_file():
        sys.path.insert(0, str(ROOT))
        from bench.hf_factory import save_marian

        save_marian(folder)
    return folder


async def shoot(folder: Path, svg: Path) -> None:
    """Open the lab on ``folder``, translate ``TEXT``, save the Attention pane's cross view."""
    from textual.widgets import Input

    from tui_lab.ui.app import LabApp

    os.chdir(folder.parent)  # the lab names the model as typed: the folder's name, not its path
    app = LabApp(model_source=folder.name)
    app.animation_level = "none"
    async with app.run_test(size=(120, 40)) as pilot:
        while app.opened is None:
            if app.model_source is None:
                raise SystemExit(f"the model did not open: {folder}")
            await pilot.pause(0.2)
        await pilot.press("3")
        app.query_one("#decode-input", Input).value = TEXT
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.press("4", "k", "k", "down", "down", "right", "right")  # encoder self -> decoder self -> cross
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        for field in app.query(Input):
            field.cursor_blink = False
        app.clear_notifications()
        await pilot.pause()
        app.save_screenshot(str(svg.name), str(svg.parent))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder", type=Path, help="where the random Marian model is kept")
    p.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = p.parse_args()
    folder = (args.folder or Path(tempfile.gettempdir()) / "tiny-marian-random").resolve()
    svg = (args.out / "marian-cross-attention.svg").resolve()
    asyncio.run(shoot(marian_folder(folder), svg))
    print_with_png(svg)


if __name__ == "__main__":
    main()
