"""The lab's recipe for an SAE on a model's hook: windows of its text, a fresh SAE, the settings.

One place for what ``tfx-lab sae train`` and the lab's Features pane both do, so
the two train alike (``core/verbs/sae_train.py`` runs it): the text (a file's,
split 90/10, or the model's own split) cut into windows of the model's context (at
most 128 tokens), the hook (by default the last residual stream), a
TopK/ReLU/JumpReLU/BatchTopK/Matryoshka BatchTopK SAE of the hook's width, training settings scaled to the token
count (buffer, dead-feature window, evaluation and learning-rate decay), and CE
loss recovered on a few held-out windows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from tui_lab.core.errors import LabError
from tui_lab.core.sae.activations import token_windows
from tui_lab.core.sae.config import BATCH_TOPK, WITH_K, SAEConfig, SAEMetadata
from tui_lab.core.sae.defaults import BATCH, LR, TOKENS
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings

if TYPE_CHECKING:
    from tui_lab.core.sae.activations import HookedLike
    from tui_lab.core.sae.metrics import CELosses

HELD_OUT = 0.1  # the share of a text file kept out of training
CE_WINDOWS = 8  # held-out windows CE loss recovered is measured on
PASS_TOKENS = 4096  # tokens per forward pass when reading activations
# A BatchTopK SAE's share of training that keeps k features per token before the batch-wide
# selection (``batchtopk.py``). Measured on char-lm (1,024 features, k 16, 300,000 and
# 400,000 rows, 3 seeds; bench/RESULTS.md): from the start, BatchTopK's held-out EV trailed
# TopK's at the same L0 by 0.002-0.005; half the steps as TopK first put it ahead in all six
# runs (by 0.0002-0.0010), a quarter in five (the sixth level), three quarters 0.0001 above
# to 0.0008 below, and TopK throughout (the threshold only added at the end) 0.01 behind.
TOPK_START = 0.5


def read_texts(model: HookedLike, path: str | None, name: str) -> tuple[str, str]:
    """(training text, held-out text): the file at ``path`` split 90/10, else the model's own
    split; LabError (one line) when the file cannot be read or the model ``name`` has no text."""
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise LabError(f"--text {path}: cannot read it ({exc.__class__.__name__})") from None
        cut = int(len(text) * (1 - HELD_OUT))
        return text[:cut], text[cut:]
    task = model.task
    if hasattr(task, "train_text") and hasattr(task, "val_text"):
        return task.train_text, task.val_text
    raise LabError(f"--text FILE: {name} has no text of its own to read activations from")


def rows_per_pass(windows: torch.Tensor) -> int:
    """Windows per forward pass when reading activations (about PASS_TOKENS tokens)."""
    return max(1, PASS_TOKENS // windows.shape[1])


def last_resid(model: HookedLike) -> str:
    """The residual stream after the model's last block (an encoder-decoder's: its encoder's,
    which reads the text)."""
    names = [n for n in model.hook_names() if n.endswith("hook_resid_post")
             and (model.decoder_only or n.startswith("encoder."))]
    if not names:
        raise LabError("this model has no residual-stream hook (hook_resid_post)")
    return str(names[-1])


def ce_scorer(model: HookedLike, hook: str, held_out: torch.Tensor) -> Callable[[SparseAutoencoder], CELosses]:
    """CE clean, zero-ablated and reconstructed (``CELosses``) of an SAE at ``hook`` on the
    first CE_WINDOWS held-out windows (their clean run read once, here)."""
    from tui_lab.core.sae.activations import logits_under, reconstruction, scored_text
    from tui_lab.core.sae.metrics import ce_losses

    scored = scored_text(model, held_out[:CE_WINDOWS])

    def score(sae: SparseAutoencoder) -> CELosses:
        return ce_losses(logits_under(model, scored.ids, hook, scored.target), scored.tokens,
                         reconstruction(sae), scored.shift)

    return score


def text_windows(handle: HookedLike, text: str) -> torch.Tensor:
    """The text's ids cut into (n, T) windows of the model's context (at most 128 tokens)."""
    limit = int(handle.config.model.max_len or 128)
    block = handle.config.task.block_size or limit
    return token_windows(handle.to_tokens(text)[0].cpu(), max(2, min(128, block, limit)))


def new_sae(width: int, d_sae: int, arch: str, k: int | None, hook: str, model_name: str | None,
            context: int, device: str = "cpu", seed: int = 0, widths: list[int] | None = None,
            steps: int | None = None) -> SparseAutoencoder:
    """A fresh SAE of ``width`` inputs at ``hook`` (``arch``: one of config.ARCHITECTURES);
    ``widths``: a Matryoshka SAE's prefix sizes (None: ``matryoshka_widths(d_sae)``); ``steps``:
    the training's length, which sets BatchTopK's threshold rate (``threshold_rate``)."""
    meta = SAEMetadata(hook_name=hook, model_name=model_name, context_size=context, prepend_bos=False)
    nested = (widths or matryoshka_widths(d_sae)) if arch == "matryoshka_batchtopk" else None
    cfg = SAEConfig(d_in=width, d_sae=d_sae, architecture=arch, k=k if arch in WITH_K else None,
                    matryoshka_widths=nested, topk_threshold_lr=threshold_rate(steps), metadata=meta)
    return SparseAutoencoder(cfg, device=device, seed=seed)


def threshold_rate(steps: int | None) -> float:
    """BatchTopK's running-threshold rate for a run of ``steps``: SAELens's 0.01 for long runs,
    faster for short ones, so the average spans about the last fifteenth of training (within the
    last fifth, where the learning rate decays and the activations settle). On char-lm's 293
    steps, 0.01 averaged over activations still shrinking and left held-out L0 at 13.8 for k = 16.
    The running θ serves the evaluations during training and a resumed run; the file's threshold
    is calibrated at the end (``batchtopk.calibrate_threshold``)."""
    return 0.01 if not steps else min(0.1, max(0.01, 15.0 / steps))


def matryoshka_widths(d_sae: int) -> list[int]:
    """The default prefix sizes: a sixteenth, a quarter and all of ``d_sae`` (1024: 64/256/1024),
    those below one feature dropped."""
    return sorted({w for w in (d_sae // 16, d_sae // 4, d_sae) if w >= 1})


def train_settings(tokens: int = TOKENS, batch: int = BATCH, lr: float = LR, seed: int = 0,
                   arch: str | None = None, **coefficients: float) -> TrainSettings:
    """The settings for ``tokens`` rows: buffer, dead window, ten evaluations, a decay over the last
    fifth; for a BatchTopK ``arch``, its first TOPK_START of the steps keep k per token."""
    steps = max(1, tokens // batch)
    return TrainSettings(tokens=tokens, batch_size=batch, lr=lr, seed=seed,
                         buffer_rows=max(2 * batch, min(65_536, tokens)),
                         dead_window=max(batch, min(100_000, tokens // 4)),
                         eval_every=max(1, steps // 10), log_every=5,
                         lr_decay_steps=max(1, steps // 5),
                         topk_start_steps=int(TOPK_START * steps) if arch in BATCH_TOPK else 0,
                         **coefficients)  # type: ignore[arg-type]
