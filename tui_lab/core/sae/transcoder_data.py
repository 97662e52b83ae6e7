"""What transcoders train and are measured on: windows of token ids with their targets,
and the (MLP input, MLP output) pairs of every layer, from one forward pass each.

A model with text of its own (char-lm) or a ``--text`` file gives windows of that
text, each token predicting the next; a decoder-only task that makes batches
(induction, copy, ...) gives its own sequences, scored where the task scores them
(its ``tgt_out``; ``IGNORE`` elsewhere).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from tui_lab.core.errors import LabError
from tui_lab.core.sae.transcoder_layers import TranscoderSet

if TYPE_CHECKING:
    from tui_lab.core.model.hook_points import HookFn
    from tui_lab.core.sae.activations import HookedLike

IGNORE = -100  # a target position not scored (the tasks' and F.cross_entropy's convention)
HELD_OUT_SEED = 7_777_777  # held-out task sequences never share the training stream's seed


@dataclass(frozen=True)
class Windows:
    """Token ids (n, T) and the target of each position (n, T): the next token or IGNORE."""

    ids: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def head(self, n: int) -> Windows:
        return Windows(self.ids[:n], self.targets[:n])


def text_targets(ids: torch.Tensor) -> torch.Tensor:
    """Next-token targets of (n, T) windows: ids shifted left, the last position IGNORE."""
    return torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], IGNORE)], dim=1)


def windows_of(model: HookedLike, text_path: str | None, n_tokens: int, seed: int, name: str,
               held_out: bool = False) -> Windows:
    """About ``n_tokens`` tokens of windows: the text (a file's or the model's own; the last
    tenth when ``held_out``), or else the task's sequences. LabError (one line) if neither."""
    from tui_lab.core.sae.recipe import read_texts, text_windows

    task = model.task
    if text_path or (hasattr(task, "train_text") and hasattr(task, "val_text")):
        train_text, held_text = read_texts(model, text_path, name)
        ids = text_windows(model, held_text if held_out else train_text)
        ids = ids[: max(1, -(-n_tokens // ids.shape[1]))]
        return Windows(ids, text_targets(ids))
    batch_fn = getattr(task, "batch", None)
    if not model.decoder_only or batch_fn is None:
        raise LabError(f"--text FILE: {name} has no text or task sequences to read MLP activations from")
    rng = random.Random(HELD_OUT_SEED + seed if held_out else seed)
    first = batch_fn(rng, 1)
    per = max(1, -(-n_tokens // first.tgt_in.shape[1]))
    batch = batch_fn(rng, per)
    return Windows(batch.tgt_in, batch.tgt_out)


def pair_hooks(tset: TranscoderSet, layers: list[int] | None = None) -> list[str]:
    """Each layer's (default: every layer's) input and output hook, in the joined rows' order."""
    chosen = range(tset.n_layers) if layers is None else layers
    return [hook for layer in chosen for hook in (tset.input_hook(layer), tset.output_hook(layer))]


def pair_rows(model: HookedLike, tset: TranscoderSet, ids: torch.Tensor, batch: int,
              epochs: int | None = None, seed: int = 0, layers: list[int] | None = None
              ) -> Iterator[torch.Tensor]:
    """Joined rows (B·T, L·2·d): each layer's (default: every layer's) MLP input then output,
    ``batch`` windows a pass; ``epochs=None`` goes round for ever, each pass in a new order."""
    names = pair_hooks(tset, layers)
    g = torch.Generator().manual_seed(seed)
    done = 0
    while epochs is None or done < epochs:
        order = torch.randperm(ids.shape[0], generator=g) if done else torch.arange(ids.shape[0])
        for start in range(0, ids.shape[0], batch):
            with torch.no_grad():
                _, cache = model.run_with_cache(ids[order[start : start + batch]], names=names)
            joined = torch.cat([cache[name] for name in names], dim=-1)  # (B, T, L·2·d)
            yield joined.reshape(-1, joined.shape[-1])
        done += 1


# A layer's replacement: the MLP's input at that layer -> what its output becomes.
Replace = Callable[[int, torch.Tensor], torch.Tensor]


def replacing_hooks(tset: TranscoderSet, layers: list[int], replace: Replace) -> list[tuple[str, HookFn]]:
    """Hooks that read each layer's MLP input and put ``replace(layer, input)`` in place of its output.

    The input hook fires before the output hook within a block, so the input kept is
    this forward pass's (downstream of any earlier replacement).
    """
    seen: dict[int, torch.Tensor] = {}
    hooks: list[tuple[str, HookFn]] = []
    for layer in layers:
        def keep(act: torch.Tensor, _name: str, layer: int = layer) -> torch.Tensor:
            seen[layer] = act
            return act

        def put(act: torch.Tensor, _name: str, layer: int = layer) -> torch.Tensor:
            return replace(layer, seen.pop(layer)).to(act.dtype).reshape(act.shape)

        hooks += [(tset.input_hook(layer), keep), (tset.output_hook(layer), put)]
    return hooks
