"""Switching attention heads off: by name, zeroed or replaced by their mean output.

A head's contribution to a layer is its slice of ``hook_z`` (B, T, H, d_head),
the heads' outputs that ``w_o`` mixes back into d_model. Replacing that slice
removes exactly one head and nothing else, on the explicit and the fused
attention path alike, with or without a KV cache.

Modes:

- ``zero``: the slice becomes 0 (the head says nothing; ``w_o``'s bias stays);
- ``mean``: the slice becomes the head's mean output over a probe batch
  (``head_means``), so the layer still sees a typical value from it but no
  information about this input (zeroing can push a layer off its usual range).

Head names are the lab's attention names plus ``:head``: ``encoder.0.self:1``,
``decoder.1.self:0``, ``decoder.0.cross:2``. The hooks live for one call
(``ablation_hooks`` with ``using_hooks``, or the ``ablate`` block): nothing is
set on the model, so another thread running it sees every head.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tui_lab.core.errors import LabError
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.attention import MultiHeadAttention
from tui_lab.core.model.hook_points import HookFn, HookSpec, using_hooks
from tui_lab.core.tasks.base import Batch
from tui_lab.core.tasks.vocab import PAD

MODES = ("zero", "mean")


class AblationError(LabError):
    """A head name or mode the model does not have; one line saying what exists."""


@dataclass(frozen=True, order=True)
class HeadRef:
    """One attention head: its module's lab name and a head index."""

    name: str
    head: int

    def __str__(self) -> str:
        return f"{self.name}:{self.head}"


def attention_modules(model: nn.Module) -> dict[str, MultiHeadAttention]:
    """Every attention module of ``model`` by its lab name, in model order."""
    return {m.lab_name: m for m in model.modules() if isinstance(m, MultiHeadAttention)}


def all_heads(model: nn.Module) -> list[HeadRef]:
    """Every head of every attention module, in model order."""
    return [HeadRef(name, h) for name, m in attention_modules(model).items() for h in range(m.n_heads)]


def parse_head(text: str, model: nn.Module) -> HeadRef:
    """``"decoder.0.cross:2"`` -> HeadRef; AblationError (one line) if the model has no such head."""
    modules = attention_modules(model)
    known = ", ".join(modules) or "none"
    name, sep, index = text.strip().rpartition(":")
    if not sep or not name:
        raise AblationError(f"head {text!r}: expected NAME:HEAD, e.g. {next(iter(modules), 'decoder.0.self')}:0")
    if name not in modules:
        raise AblationError(f"head {text!r}: no attention module {name!r} (this model has: {known})")
    try:
        head = int(index)
    except ValueError:
        raise AblationError(f"head {text!r}: {index!r} is not a head number") from None
    n = modules[name].n_heads
    if not 0 <= head < n:
        raise AblationError(f"head {text!r}: {name} has heads 0..{n - 1}")
    return HeadRef(name, head)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise AblationError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    return mode


def _head_replacer(heads: list[int], values: Tensor | None) -> HookFn:
    """A ``hook_z`` hook replacing the given heads' outputs (zeros or ``values`` (H, d_head))."""

    def hook(z: Tensor, _name: str) -> Tensor:
        z = z.clone()  # (B, T, H, d_head)
        for h in heads:
            z[..., h, :] = 0.0 if values is None else values[h].to(z.dtype)
        return z

    return hook


def ablation_hooks(
    model: nn.Module,
    heads: Sequence[HeadRef],
    mode: str = "zero",
    means: dict[str, Tensor] | None = None,
) -> list[HookSpec]:
    """The ``hook_z`` hooks that switch ``heads`` off, for ``using_hooks``.

    ``mode="mean"`` needs ``means`` (``head_means``'s result). An empty
    ``heads`` gives no hooks, so callers need no special case for "none".
    """
    check_mode(mode)
    if mode == "mean" and means is None:
        raise ValueError("mode='mean' needs the heads' means (head_means)")
    modules = attention_modules(model)
    by_module: dict[str, list[int]] = {}
    for ref in heads:
        if ref.name not in modules or not 0 <= ref.head < modules[ref.name].n_heads:
            raise AblationError(f"head {ref}: not in this model")
        by_module.setdefault(ref.name, []).append(ref.head)
    return [
        (modules[name].hook_names.z, _head_replacer(hs, None if means is None or mode == "zero" else means[name]))
        for name, hs in by_module.items()
    ]


@contextmanager
def ablate(
    model: nn.Module,
    heads: Sequence[HeadRef],
    mode: str = "zero",
    means: dict[str, Tensor] | None = None,
) -> Iterator[None]:
    """Inside the block, in this thread, ``heads`` of ``model`` are switched off."""
    with using_hooks(ablation_hooks(model, heads, mode, means)):
        yield


@torch.no_grad()
def head_means(
    model: nn.Module, batch: Batch, device: torch.device | str = "cpu", pad_id: int | None = PAD
) -> dict[str, Tensor]:
    """Each module's mean per-head output (H, d_head) over ``batch``'s real tokens.

    One teacher-forced forward over the probe batch; positions holding padding
    are left out (encoder modules see the source, decoder modules the target
    input), so the mean is that of outputs the model actually produces.
    ``pad_id=None``: nothing is padding (a real model's text, where id 0 is a token).
    """
    modules = attention_modules(model)
    sums: dict[str, Tensor] = {}
    counts: dict[str, Tensor] = {}
    src = None if batch.src is None else batch.src.to(device)
    tgt = batch.tgt_in.to(device)

    def recorder(name: str) -> HookFn:
        def hook(z: Tensor, _hook: str) -> None:
            x = z.float()  # (B, T, H, d_head)
            tokens = src if src is not None and name.startswith("encoder") else tgt
            real = torch.ones_like(tokens, dtype=torch.bool) if pad_id is None else tokens != pad_id
            keep = real.float()[..., None, None]  # (B, T, 1, 1)
            sums[name] = (x * keep).sum(dim=(0, 1))  # (H, d_head)
            counts[name] = keep.sum()

        return hook

    with evaluating(model):
        with using_hooks([(m.hook_names.z, recorder(n)) for n, m in modules.items()]):
            model(tgt) if src is None else model(src, tgt)
    return {name: sums[name] / counts[name].clamp(min=1.0) for name in sums}
