"""Run folders of lab models with random weights, for the export tests.

A model is built from a ``model:`` section, every parameter perturbed (so a
LayerNorm left at 1/0 or a zero bias cannot hide a weight written to the wrong
place), and saved as a run folder with the lab's own checkpoint functions.
The task is char-lm on a small text file: the vocabulary is the lab's text
vocabulary, whatever the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tui_lab.core.config.lab_config import from_dict
from tui_lab.core.model.models import build_run_model
from tui_lab.core.runs.checkpoint import save_checkpoint
from tui_lab.core.runs.folder import init_run
from tui_lab.core.tasks import make_task

TEXT = "The cat sat on the mat. Once upon a time there was a little dog.\n" * 8
SMALL = dict(arch="decoder-only", n_encoder_layers=0, n_decoder_layers=2, d_model=32, n_heads=4, d_ff=64, max_len=64)


def save_run(folder: Path, seed: int = 0, **model: Any) -> tuple[Path, Any]:
    """A run folder at ``folder`` of a random char-lm model with ``model`` settings; (folder, model)."""
    text = folder.parent / f"{folder.name}.txt"
    text.write_text(TEXT)
    config = from_dict({
        "model": {**SMALL, **model},
        "task": {"name": "char-lm", "text": str(text), "block_size": 32},
        "train": {"steps": 1, "history": False},
    })
    torch.manual_seed(seed)
    task = make_task(config.task)
    net = build_run_model(config, len(task.vocab))
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    init_run(folder, config)
    optimizer = torch.optim.AdamW(net.parameters())
    save_checkpoint(folder, net, optimizer, {"step": 7}, config)
    return folder, net.eval()
