"""``screenshots/real-model-attention.svg`` (and ``.png``): the Attention pane on a real-shaped model.

    python scripts/real_model_screenshot.py [--folder DIR] [--out screenshots]

Real weights cannot be fetched here, so the model is GPT-2 small's layout (12
layers x 12 heads, d_model 768, context 1,024, 124 M parameters) with random
weights and a small byte-level BPE, written by ``transformers``' ``save_pretrained``
(``bench/hf_factory.py``; ``transformers`` is a test-only dependency).
The small tokenizer has a few hundred pieces, not GPT-2's 50,257: the embedding
rows past it are zeroed (the head is tied), so a greedy continuation picks
pieces the tokenizer has and every label reads as text. The lab opens the folder
with ``--model``, decodes a text and shows layer 1, head 1 with the walkthrough
of one row. The PNG needs ``rsvg-convert``.
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
TEXT = "The cat sat on the mat. The dog sat on the log. The cat sat on the"
GPT2_SMALL = dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257)


def gpt2_small_folder(folder: Path) -> Path:
    """A random-weight folder at GPT-2 small's layout (written once; reused if present)."""
    if not (folder / "model.safetensors").is_file():
        sys.path.insert(0, str(ROOT))
        from bench.hf_factory import save_family

        save_family(folder, "gpt2", **GPT2_SMALL)
        zero_rows_past_tokenizer(folder)
    return folder


def zero_rows_past_tokenizer(folder: Path) -> None:
    """Zero ``wte`` (and so the tied head) past the tokenizer's pieces: their logits are 0."""
    import json

    from safetensors.torch import load_file, save_file

    pieces = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
    path = folder / "model.safetensors"
    tensors = load_file(path)
    key = next(k for k in tensors if k.endswith("wte.weight"))
    tensors[key][pieces:] = 0.0
    save_file(tensors, path, metadata={"format": "pt"})


async def shoot(folder: Path, svg: Path) -> None:
    """Open the lab on ``folder``, decode ``TEXT``, save the Attention pane."""
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
        await pilot.press("4", "down", "down", "down", "down", "down", "down", "w")
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        for field in app.query(Input):
            field.cursor_blink = False
        app.clear_notifications()
        await pilot.pause()
        app.save_screenshot(str(svg.name), str(svg.parent))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder", type=Path, help="where the random GPT-2-small-shaped model is kept")
    p.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = p.parse_args()
    folder = (args.folder or Path(tempfile.gettempdir()) / "gpt2-small-random").resolve()
    svg = (args.out / "real-model-attention.svg").resolve()
    asyncio.run(shoot(gpt2_small_folder(folder), svg))
    print_with_png(svg)


if __name__ == "__main__":
    main()
