"""Save an encoder-only run's attention (Attention's all-heads view and atlas after a fill-mask
decode) and its Decode pane as SVGs at 120x40, with a PNG beside each.

    python scripts/encoder_screenshot.py --run RUN_DIR [--input TEXT] [--layer N] [--out-dir screenshots]

``RUN_DIR`` is an ``mlm-char`` run (``tfx-lab train --preset mlm-char``): the lab
opens it, fills the masks of ``--input`` in Decode (``3``, Enter), saves
``encoder-decode.svg``, then shows Attention's all heads of layer ``--layer``
(``4``, ``a``, ``l``) with the head atlas and saves ``encoder-attention.svg``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from shot_tools import SIZE, print_with_png, wait_for
from textual.widgets import Input

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "encoder_screenshot"


async def make(run: str, text: str, layer: int, out_dir: Path) -> list[Path]:
    """Open the lab on ``run``, fill ``text``'s masks, write the Decode and Attention SVGs."""
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.attention.attention_pane import AttentionPane
    from tui_lab.ui.widgets.head_atlas import HeadAtlas

    app = LabApp(run_dir=run, warm_hidden_panes=False)
    app.animation_level = "none"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def save(name: str, title: str) -> None:
        for field in app.query(Input):
            field.cursor_blink = False
        app.clear_notifications()
        out = out_dir / name
        out.write_text(app.export_screenshot(title=title), encoding="utf-8")
        written.append(out)

    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.current_run is not None, 180, "the run", SCRIPT)
        await pilot.press("3")
        app.query_one("#decode-input", Input).value = text
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.last_decode is not None, 60, "the fill", SCRIPT)
        await pilot.pause(0.5)
        save("encoder-decode.svg", "tfx-lab · fill-mask")
        await pilot.press("4", "a", *("l" * layer))
        atlas = app.query_one(AttentionPane).query_one(HeadAtlas)
        await wait_for(pilot, lambda: atlas.heads is not None or atlas.error, 120, "the atlas", SCRIPT)
        await pilot.pause(0.5)
        save("encoder-attention.svg", "tfx-lab · encoder-only attention")
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="an mlm-char run folder")
    p.add_argument("--input", default="def f(x): re_urn x", help="text with _ masks, filled first")
    p.add_argument("--layer", type=int, default=0, help="the layer whose heads are drawn (0-based)")
    p.add_argument("--out-dir", type=Path, default=ROOT / "screenshots")
    args = p.parse_args(argv)
    for svg in asyncio.run(make(args.run, args.input, args.layer, args.out_dir)):
        print_with_png(svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
