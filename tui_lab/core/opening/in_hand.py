"""``ModelInHand``: the model the lab is looking at, what it carries and its hook API.

``open_model`` (``model_in_hand.py``) makes one from any source; the steps that
open a run folder (``from_run.py``) and model files (``from_files.py``) build it
here, below the opener, so no module of opening imports one that imports it back.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.model.hook_points import HookFn, names_filter, using_hooks
from tui_lab.core.tasks.protocol import Task

if TYPE_CHECKING:
    from pathlib import Path

    from tui_lab.core.opening.model_card import ModelCard

TokensLike = str | list[int] | Tensor
Names = Iterable[str] | Callable[[str], bool] | str | None


class HookError(LabError):
    """A hook name the model does not have, or input it cannot take; one line."""


def _nothing_to_settle() -> None:
    return None


class ModelInHand:
    """The model the lab is looking at (a run, a run at a history step, a model opened
    from files): its shape, model (in eval mode), task, config, card, step, device and
    the notes opening it made, seen through its hook points.

    Frozen in use: nothing the lab does trains it, so callers share it; one that must
    change its modules or weights (ablation, steering in a worker) takes ``private_copy()``.
    """

    def __init__(
        self,
        config: LabConfig,
        task: Task,
        model: nn.Module,
        step: int,
        device: torch.device,
        notes: list[str],
        card: ModelCard | None = None,
        settle: Callable[[], object] = _nothing_to_settle,
        run_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.task = task
        self.model = model.eval()
        self.step = step
        self.device = device
        self.notes = notes  # what opening noticed (a save cut off midway, weights widened)
        self.card = card  # a model opened from files: what was read from which file; None for a run
        self._settle = settle
        self._names: list[str] | None = None
        # the run folder it came from (None: a model from files): its history stays reachable
        self.run_dir = run_dir

    @property
    def shape(self) -> Shape:
        """Encoder-decoder, decoder-only or encoder-only (``config.model.shape``)."""
        return self.config.model.shape

    @property
    def decoder_only(self) -> bool:
        """One stack that reads ids alone (decoder-only or encoder-only): no separate source."""
        return self.shape.one_stack

    def settle(self) -> object:
        """Finish what opening left for later (a model from files: its weights' layout for
        decoding); safe from any thread, a no-op once done. Before copying the model's
        modules or counting its tensors by identity. Returns what the layout reports
        (a model from files: the bytes it copied; None when nothing was left)."""
        return self._settle()

    def private_copy(self) -> ModelInHand:
        """The same model in hand with its own modules and weights (settled first): for a
        caller that must not share (ablating or steering in a worker). No parameter or
        buffer storage is shared with this one."""
        self.settle()
        return ModelInHand(
            self.config, self.task, copy.deepcopy(self.model), self.step, self.device,
            list(self.notes), self.card, run_dir=self.run_dir,
        )

    def to_tokens(self, text: str) -> Tensor:
        """(1, T) ids of ``text`` as the model reads it (its tokenizer or the task's vocabulary)."""
        ids = self.task.vocab.encode(text)
        if not ids:
            raise HookError("empty input: give some text")
        return torch.tensor([ids], device=self.device)

    def to_str_tokens(self, text_or_ids: TokensLike) -> list[str]:
        """The pieces of ``text_or_ids``, one label per token."""
        ids = self._ids(text_or_ids)[0].tolist()
        return [self.task.vocab.label(int(i)) for i in ids]

    def _ids(self, text_or_ids: TokensLike) -> Tensor:
        if isinstance(text_or_ids, str):
            return self.to_tokens(text_or_ids)
        ids = torch.as_tensor(text_or_ids, dtype=torch.long, device=self.device)
        return ids[None] if ids.dim() == 1 else ids  # (B, T)

    def _forward(self, ids: Tensor, target: TokensLike | None) -> Tensor:
        if self.decoder_only:
            limit = int(self.config.model.max_len)
            if ids.size(1) > limit:
                raise HookError(f"input of {ids.size(1)} tokens: the model reads at most {limit}")
            return self.model(ids)
        if target is None:
            start = self.task.decoder_start_id
            tgt = torch.full((ids.size(0), 1), start, dtype=torch.long, device=self.device)
        else:
            tgt = self._ids(target)
        return self.model(ids, tgt)

    def hook_names(self) -> list[str]:
        """Every hook point of the model, in the order a forward pass reaches them."""
        if self._names is None:
            seen: dict[str, None] = {}
            probe = torch.tensor([[self._probe_id()] * 2], device=self.device)
            with torch.no_grad(), using_hooks([(lambda _n: True, lambda _x, n: seen.setdefault(n))]):
                self._forward(probe, None)
            self._names = list(seen)
        return list(self._names)

    def _probe_id(self) -> int:
        vocab = self.task.vocab
        ids = vocab.encode("a") or vocab.encode("1") or [min(3, len(vocab) - 1)]
        return int(ids[0])

    def _check(self, names: Iterable[str]) -> None:
        known = set(self.hook_names())
        for name in names:
            if name not in known:
                near = difflib.get_close_matches(name, sorted(known), n=2)
                hint = f" (did you mean {' or '.join(near)}?)" if near else " (tfx-lab hooks lists them)"
                raise HookError(f"no hook point {name!r} in this model{hint}")

    def run_with_hooks(
        self,
        text_or_ids: TokensLike,
        hooks: Iterable[tuple[str | Callable[[str], bool], HookFn]] = (),
        *,
        target: TokensLike | None = None,
    ) -> Tensor:
        """Logits (B, T, V) with each ``fn(activation, name)`` applied at its hook point
        (by name or by a filter over names); a returned tensor replaces the activation."""
        hooks = list(hooks)
        self._check(name for name, _ in hooks if isinstance(name, str))
        with using_hooks(hooks):
            return self._forward(self._ids(text_or_ids), target)

    def run_with_cache(
        self, text_or_ids: TokensLike, names: Names = None, *, target: TokensLike | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """(logits, cache): every activation ``names`` selects (all when None; a name, a
        list, or a filter), detached, by hook name."""
        if isinstance(names, str):
            names = [names]
        if names is not None and not callable(names):
            names = list(names)
            self._check(names)
        cache: dict[str, Tensor] = {}
        with using_hooks([(names_filter(names), lambda x, n: cache.__setitem__(n, x.detach()))]):
            logits = self._forward(self._ids(text_or_ids), target)
        return logits, cache
