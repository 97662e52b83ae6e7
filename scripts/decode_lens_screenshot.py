"""``screenshots/decode-tuned-lens.svg`` (and ``.png``): the Decode pane with the tuned lens on show.

    python scripts/decode_lens_screenshot.py [--run RUN_DIR] [--input TEXT] [--out screenshots/decode-tuned-lens.svg]

The run defaults to the shipped ``tests/data/learned-copy``. It opens the lab on the run,
decodes the input in the Decode pane (3), shows the logit lens (``v``), switches to the tuned
lens (``V``: fitted on the run's own data first, with progress) and saves the SVG once its
per-layer KL and top-1 agreement are in. The fit is seeded, so the picture repeats. A PNG is
written too when ``rsvg-convert`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from shot_tools import SIZE, print_with_png, save_svg, wait_for
from textual.widgets import Input, Static

RUN = Path(__file__).resolve().parent.parent / "tests" / "data" / "learned-copy"


async def make(run: Path, out: Path, text: str) -> Path:
    import torch

    from tui_lab.ui import pane_registry
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.decode.decode_pane import DecodePane
    from tui_lab.ui.panes.decode.logit_lens import LogitLens

    torch.manual_seed(0)
    app = LabApp(preset="copy", run_dir=str(run))
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None and app.current_run is not None, 300, "the run")
        await pilot.press(pane_registry.spec("decode").key)
        pane = app.query_one(DecodePane)
        await wait_for(pilot, lambda: pane.run is not None, 120, "Decode's model")
        app.query_one("#decode-input", Input).value = text
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        pane.query_one("#decode-steps").focus()
        scores = pane.query_one("#decode-lens-scores", Static)
        await pilot.press("v", "V")
        lens = pane.query_one("#decode-lens", LogitLens)
        await wait_for(pilot, lambda: lens.kind == "tuned" and "KL to the output" in str(scores.render()),
                       600, "the tuned lens")
        await save_svg(app, pilot, out, "tfx-lab · decode, tuned lens")
        print(str(scores.render()), file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=RUN, help="a trained run (default: the shipped learned-copy)")
    parser.add_argument("--input", default="31415", help="what to decode (default: 31415)")
    parser.add_argument("--out", type=Path, default=Path("screenshots") / "decode-tuned-lens.svg")
    args = parser.parse_args(argv)
    print_with_png(asyncio.run(make(args.run.resolve(), args.out.resolve(), args.input)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
