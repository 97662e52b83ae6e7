"""What the tuned and Jacobian lenses are fitted on: batches of the run's own data (its
task's training batches, a char-lm run's text windows) or windows of a text file.

A batch keeps what a forward pass needs (``src`` for an encoder-decoder, the decoder's
``tokens``) and ``mask``, True at the positions that are real tokens (not padding): the
lenses learn and score only there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from tui_lab.core.errors import LabError
from tui_lab.core.model.models import DecoderOnly, EncoderDecoder

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand

TEXT_WINDOW = 64  # characters or tokens per window of a text file (the char-lm preset's block)


@dataclass(frozen=True)
class LensBatch:
    """``tokens`` (B, T) the decoder reads, ``src`` (B, S) an encoder-decoder's source (else
    None), ``mask`` (B, T) True at real tokens."""

    tokens: Tensor
    src: Tensor | None
    mask: Tensor

    def forward(self, model: nn.Module) -> Tensor:
        """``model``'s logits (B, T, V) on this batch (hooks active around the call see it)."""
        return model(self.tokens) if self.src is None else model(self.src, self.tokens)

    def rows(self) -> list[LensBatch]:
        """Each row alone, cut to its real tokens (padding only ever trails)."""
        out = []
        for i in range(self.tokens.size(0)):
            n = int(self.mask[i].sum())
            src = None if self.src is None else self.src[i : i + 1]
            out.append(LensBatch(self.tokens[i : i + 1, :n], src, self.mask[i : i + 1, :n]))
        return out


def in_hand(model: ModelInHand | str | Path) -> ModelInHand:
    """``model`` itself, or the model a source names (a run folder, a model folder, a cached
    hub name) opened with ``open_model``: the lens functions take either."""
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.opening.model_in_hand import open_model

    return model if isinstance(model, ModelInHand) else open_model(model)


def lab_module(model: ModelInHand) -> EncoderDecoder | DecoderOnly:
    """The model in hand's module, which the lenses read: a decoder's stack and its head.
    An encoder-only model is refused in one line (it fills masks; ``decode --lens`` has its lens)."""
    module = model.model
    if isinstance(module, (EncoderDecoder, DecoderOnly)):
        return module
    raise LabError(f"{model.config.name}: the tuned and Jacobian lenses read a decoder's layers; "
                   "an encoder-only model has the logit lens of its fills (decode --lens)")


class BatchSource:
    """Batches of ``batch_size`` rows, one per ``next()``: windows of ``text`` (a file's
    contents) when given, else the run's task's training batches; a model opened from files
    has no data of its own and reads windows of Python's help text (``pydoc_data.topics``,
    char-lm's default: in every install). The same batches for a seed; ``data`` says which."""

    def __init__(self, model: ModelInHand, text: str | None, batch_size: int, seed: int) -> None:
        from tui_lab.core.tasks.base import TaskBase
        from tui_lab.core.tasks.token_lm import TokenLMTask

        self.module = lab_module(model)
        self.model = model
        self.batch_size = batch_size
        self.rng = random.Random(seed)
        self.ids: Tensor | None = None
        self.window = 0
        self.data = "the text file"
        if text is None and not isinstance(model.task, (TaskBase, TokenLMTask)):
            from tui_lab.core.tasks.text import default_text

            text, self.data = default_text(), "Python's help text (the model has no data of its own)"
        if text is not None:
            self._read(text)
            return
        assert isinstance(model.task, (TaskBase, TokenLMTask))
        self.task = model.task
        self.data = "the run's data"

    def _read(self, text: str) -> None:
        if not self.model.decoder_only:
            raise LabError("--text: a text file fits the lens of a decoder-only model; an encoder-decoder "
                           "is fitted on its task's pairs (leave --text out)")
        ids = self.model.task.vocab.encode(text)
        self.window = min(TEXT_WINDOW, int(self.model.config.model.max_len or TEXT_WINDOW), len(ids))
        if self.window < 2:
            raise LabError("--text: the file holds fewer than two tokens; nothing to fit on")
        self.ids = torch.tensor(ids, dtype=torch.long)

    def next(self) -> LensBatch:
        """The next batch, on the model's device."""
        device = self.model.device
        if self.ids is not None:
            starts = [self.rng.randrange(len(self.ids) - self.window + 1) for _ in range(self.batch_size)]
            tokens = torch.stack([self.ids[s : s + self.window] for s in starts]).to(device)  # (B, window)
            return LensBatch(tokens, None, torch.ones_like(tokens, dtype=torch.bool))
        batch = self.task.batch(self.rng, self.batch_size, self.model.shape).to(device)
        mask = batch.tgt_in != self.module.pad_id
        mask[:, 0] = True  # a start token may share the pad's id; it is always read
        return LensBatch(batch.tgt_in, batch.src, mask)


def lens_batches(model: ModelInHand, text: str | None, n_batches: int, batch_size: int, seed: int) -> list[LensBatch]:
    """``n_batches`` batches from a ``BatchSource`` (the run's data, or ``text``'s windows)."""
    source = BatchSource(model, text, batch_size, seed)
    return [source.next() for _ in range(n_batches)]


def read_lens_text(model: ModelInHand, path: str) -> str:
    """A text file's contents as this model reads text: cleaned to the lab's character set
    for a run of the lab's own tasks, as written for a real tokenizer."""
    from tui_lab.core.tasks.base import TaskBase
    from tui_lab.core.tasks.text import read_raw_text, read_text_file

    try:
        return read_text_file(path) if isinstance(model.task, TaskBase) else read_raw_text(path)
    except LabError as exc:  # the reader names the preset's field; here it is the option
        raise LabError(f"--text: {str(exc).removeprefix('task.text: ')}") from None
