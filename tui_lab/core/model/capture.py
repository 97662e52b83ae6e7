"""Attention weights recorded through the ``hook_pattern`` hook points, by the lab's names.

    with capture_attention(model) as store:
        model(src, tgt)
    store.matrices()["decoder.0.cross"]  # (B, H, Tq, Tk)

Inside the block, in this thread only, a hook on every attention module's
``hook_pattern`` records the weights under the module's ``lab_name``
(``encoder.{i}.self``, ``decoder.{i}.self``, ``decoder.{i}.cross``); asking
for the pattern puts those modules on the explicit path for these calls.
Nothing is set on the model: outside the block, or in another thread, the
fused kernel runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.model.attention import MultiHeadAttention
from tui_lab.core.model.hook_points import HookFn, HookSpec, using_hooks


class AttentionStore:
    """Attention weights recorded per name, in the order the modules ran.

    Each ``record`` appends a block of query rows (B, H, Tq_step, Tk_step). A
    full forward pass records all rows at once; incremental decoding records
    one row per step, each with one more key than the last. ``matrices()``
    stacks the blocks into one (B, H, Tq, Tk) matrix per name. Use a fresh
    store for each sequence: two full passes would stack on top of each other.
    """

    def __init__(self) -> None:
        self._records: dict[str, list[torch.Tensor]] = {}

    def record(self, name: str, weights: torch.Tensor) -> None:
        self._records.setdefault(name, []).append(weights)

    def names(self) -> list[str]:
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def clear(self) -> None:
        self._records.clear()

    def matrices(self) -> dict[str, torch.Tensor]:
        """name -> (B, H, Tq, Tk); shorter key rows are padded with zeros on the right.

        A name recorded once (a full pass) gives back the recorded tensor itself.
        """
        out: dict[str, torch.Tensor] = {}
        for name, blocks in self._records.items():
            if len(blocks) == 1:  # one full pass: already the matrix (no copy of ~MBs)
                out[name] = blocks[0]
                continue
            t_k = max(w.size(-1) for w in blocks)
            # (B, H, Tq_i, Tk) each
            padded = [F.pad(w, (0, t_k - w.size(-1))) if w.size(-1) < t_k else w for w in blocks]
            out[name] = torch.cat(padded, dim=-2)  # (B, H, sum Tq_i, Tk)
        return out


def pattern_hooks(model: nn.Module, store: AttentionStore) -> list[HookSpec]:
    """A hook on every attention module's ``hook_pattern`` recording into ``store``."""

    def recorder(lab_name: str) -> HookFn:
        def hook(weights: torch.Tensor, _name: str) -> None:
            store.record(lab_name, weights.detach())

        return hook

    return [
        (m.hook_names.pattern, recorder(m.lab_name))
        for m in model.modules()
        if isinstance(m, MultiHeadAttention)
    ]


@contextmanager
def capture_attention(
    model: nn.Module, store: AttentionStore | None = None
) -> Iterator[AttentionStore]:
    """Record every attention module's weights while the block is open (this thread only).

    ``store``: add to an existing store (records keep their order) instead of a
    new one, e.g. the encoder's pass and the decoder's pass of one decode.
    """
    store = AttentionStore() if store is None else store
    with using_hooks(pattern_hooks(model, store)):
        yield store
