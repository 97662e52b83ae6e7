"""The same hook's activations at two or more sources, on the same tokens.

A crosscoder reads one hook at n sources (models in hand: snapshots of one
run, or a model and its fine-tune). Every source reads the same windows of
ids, so row i of the result is one token seen by every source: (N, n, d).
Before any model work the sources are checked against each other (the hook
at each, its width, the vocabulary), each mismatch one line naming the source.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

from tui_lab.core.config.shape import Shape
from tui_lab.core.sae.activations import HookedLike, flat_site, site_width, token_windows
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.tasks.base import TaskBase

Progress = Callable[[int, int], None]  # (rows done, rows in all)
MAX_CONTEXT = 128  # windows are at most this long, as the SAE recipe's


def check_sources(models: Sequence[HookedLike], labels: Sequence[str], hook: str, sample: torch.Tensor) -> int:
    """The hook's width, the same at every source (one forward of ``sample``, (1, T) ids, each);
    SAEError (one line) when the sources differ."""
    if len(models) < 2:
        raise SAEError(f"a crosscoder reads two or more sources, got {len(models)}")
    first_vocab = len(models[0].task.vocab)
    for model, label in zip(models, labels, strict=True):
        if hook not in model.hook_names():
            raise SAEError(f"{label}: no hook {hook} (tfx-lab hooks lists them)")
        if len(model.task.vocab) != first_vocab:
            raise SAEError(f"{label}: a vocabulary of {len(model.task.vocab)} tokens, {labels[0]} has "
                           f"{first_vocab}: the sources must read the same tokens")
    widths = [site_width(m, hook, sample) for m in models]
    for width, label in zip(widths[1:], labels[1:], strict=True):
        if width != widths[0]:
            raise SAEError(f"{label}: {hook} has width {width}, {labels[0]} has {widths[0]} "
                           "(different d_model: the sources must share the hook's shape)")
    return widths[0]


def context_of(model: HookedLike) -> int:
    """The window length: the model's context (and the task's block), at most MAX_CONTEXT."""
    limit = int(model.config.model.max_len or MAX_CONTEXT)
    block = model.config.task.block_size or limit
    return max(2, min(MAX_CONTEXT, block, limit))


def shared_windows(model: HookedLike, text: str | None, tokens: int, seed: int = 0) -> torch.Tensor:
    """(n, T) windows of ids every source reads: ``text`` (a string, cut into windows), else the
    model's own text, else sequences of its task (a decoder-only run's, such as induction's)."""
    context = context_of(model)
    task = model.task
    if text is None and isinstance(task, TaskBase) and not hasattr(task, "train_text"):
        if not model.decoder_only:
            raise SAEError(f"{task.name}: an encoder-decoder task; give --text FILE to read activations from")
        n = max(1, -(-tokens // context))
        batch = task.batch(random.Random(seed), n, Shape.DECODER_ONLY)
        return batch.tgt_in[:, :context].cpu()
    if text is None:
        own = getattr(task, "train_text", None)
        if not isinstance(own, str):
            raise SAEError(f"{task.name}: no text of its own; give --text FILE to read activations from")
        text = own
    windows = token_windows(model.to_tokens(text)[0].cpu(), context)
    return windows[: max(1, -(-tokens // context))]


def collect(models: Sequence[HookedLike], windows: torch.Tensor, hook: str, batch: int = 64,
            progress: Progress | None = None, should_stop: Callable[[], bool] | None = None
            ) -> torch.Tensor | None:
    """(N, n, d) float32 activations at ``hook`` of every source on ``windows`` (N = n·T, in
    window order); None when ``should_stop()`` ends the pass."""
    rows = []
    total = windows.numel()
    for start in range(0, windows.shape[0], batch):
        if should_stop is not None and should_stop():
            return None
        ids = windows[start : start + batch]
        rows.append(torch.stack([window_acts(m, ids, hook) for m in models], dim=-2).flatten(0, 1))
        if progress is not None:
            progress(min(total, (start + batch) * windows.shape[1]), total)
    return torch.cat(rows)


def window_acts(model: HookedLike, ids: torch.Tensor, hook: str) -> torch.Tensor:
    """(B, T, d) float32 activations of one source at ``hook`` on ids (B, T), on the CPU."""
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names=[hook])
    return flat_site(cache[hook]).float().cpu()
