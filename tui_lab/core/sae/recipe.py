"""The lab's recipe for an SAE on a model's hook: windows of its text, a fresh SAE, the settings.

One place for what ``tfx-lab sae train`` and the lab's Features pane both do, so
the two train alike: the text cut into windows of the model's context (at most
128 tokens), a TopK/ReLU/JumpReLU SAE of the hook's width, and training
settings scaled to the token count (buffer, dead-feature window, evaluation and
learning-rate decay).
"""

from __future__ import annotations

from typing import Any

import torch

from tui_lab.core.sae.activations import token_windows
from tui_lab.core.sae.config import SAEConfig, SAEMetadata
from tui_lab.core.sae.defaults import BATCH, LR, TOKENS
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings


def text_windows(handle: Any, text: str) -> torch.Tensor:
    """The text's ids cut into (n, T) windows of the model's context (at most 128 tokens)."""
    limit = int(handle.config.model.max_len or 128)
    block = getattr(handle.config.task, "block_size", None) or limit
    return token_windows(handle.to_tokens(text)[0].cpu(), max(2, min(128, block, limit)))


def new_sae(width: int, d_sae: int, arch: str, k: int | None, hook: str, model_name: str | None,
            context: int, device: str = "cpu", seed: int = 0) -> SparseAutoencoder:
    """A fresh SAE of ``width`` inputs at ``hook`` (``arch``: standard, topk or jumprelu)."""
    meta = SAEMetadata(hook_name=hook, model_name=model_name, context_size=context, prepend_bos=False)
    cfg = SAEConfig(d_in=width, d_sae=d_sae, architecture=arch, k=k if arch == "topk" else None, metadata=meta)
    return SparseAutoencoder(cfg, device=device, seed=seed)


def train_settings(tokens: int = TOKENS, batch: int = BATCH, lr: float = LR, seed: int = 0,
                   **coefficients: float) -> TrainSettings:
    """The settings for ``tokens`` rows: buffer, dead window, ten evaluations, a decay over the last fifth."""
    steps = max(1, tokens // batch)
    return TrainSettings(tokens=tokens, batch_size=batch, lr=lr, seed=seed,
                         buffer_rows=max(2 * batch, min(65_536, tokens)),
                         dead_window=max(batch, min(100_000, tokens // 4)),
                         eval_every=max(1, steps // 10), log_every=5,
                         lr_decay_steps=max(1, steps // 5), **coefficients)  # type: ignore[arg-type]
