"""``screenshots/features.svg`` (and ``.png``): the Features pane on char-lm's last residual stream.

    python scripts/features_screenshot.py [--run RUN_DIR] [--sae SAE_DIR] [--feature I]
        [--input TEXT] [--out screenshots/features.svg]

Without ``--run`` it trains the shipped ``char-lm`` preset (two minutes); without
``--sae`` it trains the SAE as ``tfx-lab sae train`` does by default (TopK,
1,024 features, k = 16, at ``blocks.3.hook_resid_post``). It opens the lab on
the run, shows the Features pane, opens the SAE (``o``), types a prompt (``/``)
and shows one feature: ``--feature``, else the strongest feature on the prompt's
first token (enter on the token list). A PNG is written too when ``rsvg-convert`` exists.
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

PROMPT = "def __init__(self):"
HOOK = "blocks.3.hook_resid_post"


async def make(run: Path, sae: Path, out: Path, prompt: str, feature: int | None) -> Path:
    from tui_lab.ui import pane_registry
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.features.features_pane import FeaturesPane

    app = LabApp(preset="char-lm", run_dir=str(run))
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.core is not None and app.current_run is not None, 180, "the run")
        await pilot.press(pane_registry.spec("features").key)
        pane = app.query_one(FeaturesPane)
        await wait_for(pilot, lambda: pane.display, 30, "the Features pane")
        await pilot.press("o")
        app.query_one("#features-path", Input).value = str(sae)
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.browser is not None, 300, "the feature table")
        await pilot.press("slash")
        app.query_one("#features-prompt", Input).value = prompt
        await pilot.press("enter")
        browser = pane.browser
        assert browser is not None
        await wait_for(pilot, lambda: bool(browser.prompt), 60, "the prompt's features")
        if feature is None:
            await pilot.press("enter")  # the first token's strongest feature
        else:
            pane.jump_to(feature)
            pane.focus_default()
        await app.workers.wait_for_complete()
        for field in app.query(Input):
            field.cursor_blink = False
        app.clear_notifications()
        await pilot.pause(0.5)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(app.export_screenshot(title="tfx-lab · features"), encoding="utf-8")
        print(f"feature {browser.feature}: density {float(browser.table.density[browser.feature]):.4f}")
    return out


def tfx(*args: str) -> None:
    exe = Path(sys.executable).with_name("tfx-lab")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tui_lab.cli"]
    subprocess.run([*cmd, *args], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=None, help="a trained char-lm run (default: train one)")
    parser.add_argument("--sae", type=Path, default=None, help="an SAE at its last block (default: train one)")
    parser.add_argument("--feature", type=int, default=None, help="the feature to show")
    parser.add_argument("--input", default=PROMPT, help="the text typed into the prompt")
    parser.add_argument("--out", type=Path, default=Path("screenshots") / "features.svg")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfx-lab-features-") as scratch:
        run = args.run.resolve() if args.run else Path(scratch) / "char-lm"
        if args.run is None:
            tfx("train", "--preset", "char-lm", "--out", str(run))
        sae = args.sae.resolve() if args.sae else Path(scratch) / "sae"
        if args.sae is None:
            tfx("sae", "train", "--run", str(run), "--hook", HOOK, "--d-sae", "1024", "--out", str(sae))
        svg = asyncio.run(make(run, sae, args.out.resolve(), args.input, args.feature))
    print_with_png(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
