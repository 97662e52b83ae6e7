"""Tiny models in hand for the lens tests: random weights, or blocks that write nothing."""

from __future__ import annotations

import torch

from tests.conftest import tiny_config
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD


def tiny_in_hand(arch: str = "decoder-only", layers: int = 3, d_model: int = 16, seed: int = 0,
                 scale: float = 0.3, norm: str = "pre") -> ModelInHand:
    """A copy-task model with random weights (normal, ``scale``) as a model in hand."""
    model_cfg = {"arch": arch, "n_decoder_layers": layers, "d_model": d_model, "n_heads": 2,
                 "d_ff": 2 * d_model, "max_len": 16,
                 "norm": norm}
    if arch == "decoder-only":
        model_cfg["n_encoder_layers"] = 0
    cfg = tiny_config(model=model_cfg)
    torch.manual_seed(seed)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    for p in model.parameters():
        p.data.normal_(0, scale)
    return ModelInHand(cfg, task, model, 0, torch.device("cpu"), [])


def silence_blocks(model: ModelInHand) -> None:
    """Zero every decoder block's attention and MLP output projections and make its norms
    plain (scale 1, shift 0): each block then passes its input through unchanged (a post-LN
    block normalises it again, which changes a normalised vector by no more than its eps),
    so every layer's output is the final residual."""
    for block in model.model.decoder.layers:
        for name, module in block.named_modules():
            if name.endswith("w_o") or name.endswith("lin2"):
                for p in module.parameters():
                    p.data.zero_()
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.data.fill_(1.0)
                module.bias.data.zero_()
