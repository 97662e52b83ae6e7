"""Token-level language modelling on a text through a real model's own tokenizer.

The task a fine-tuning run trains: ``TokenizedText`` (the tokenizer as the
lab's vocabulary, end-of-text, prompt checks) plus what training needs from a
text, laid out as char-lm lays out characters. The text is tokenized once
into one tensor of ids; the first ``1 - val_fraction`` of the tokens train,
the rest validate (no window crosses the cut); a batch is random windows of
``block_size`` tokens with the targets the same windows shifted by one. The
block is at most the model's context: a text longer than a block is trained
on windows of it.

The text is read on first use, not when the task is made, so a run folder
decodes (``load_for_inference``) even where its text is not.
"""

from __future__ import annotations

import array
import math
import random
from functools import cached_property

import torch

from tui_lab.core.config.error import ConfigError, field_error
from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks.base import Batch, as_shape
from tui_lab.core.tasks.text import default_text, read_raw_text
from tui_lab.core.tasks.tokenized import EXAMPLE_PROMPTS, TokenizedText, Tokenizer

# Held-out pairs: the model continues half a window by this many tokens.
LM_CONTINUATION = 8


class TokenLMTask(TokenizedText):
    """Next-token prediction on ``config.text`` (default: Python's help text)."""

    scores_tokens = False  # evaluation reports next-token accuracy beside the loss, not exact match

    def __init__(self, config: TaskConfig, tokenizer: Tokenizer, context: int | None = None) -> None:
        super().__init__(tokenizer, context or config.block_size)
        if config.block_size > self.context:
            raise field_error(
                "task.block_size",
                f"{config.block_size} is longer than the model's context of {self.context:,} tokens",
            )
        self.config = config
        self.source = config.text or "<python help text>"

    @cached_property
    def text(self) -> str:
        """The whole text, as written (a tokenizer needs no cleaning)."""
        return read_raw_text(self.config.text) if self.config.text else default_text()

    @cached_property
    def data(self) -> torch.Tensor:
        """(N,) int32 ids of the whole text; refused in one line when a split cannot hold a window."""
        ids = self.tokenizer.encode(self.text)
        block, fraction = self.config.block_size, self.config.val_fraction
        split = int(len(ids) * (1.0 - fraction))
        if min(split, len(ids) - split) < block + 1:
            need = math.ceil((block + 1) / min(fraction, 1 - fraction))
            raise field_error(
                "task.text",
                f"{self.source} is {len(ids):,} tokens; with block_size {block} and "
                f"val_fraction {fraction} it needs at least {need:,} (a longer text or a smaller block)",
            )
        # array('i') -> one buffer conversion: far cheaper than torch.tensor over a long list.
        return torch.frombuffer(array.array("i", ids), dtype=torch.int32)

    @property
    def split(self) -> int:
        """Where validation begins: tokens [0, split) train, [split, N) validate."""
        return int(len(self.data) * (1.0 - self.config.val_fraction))

    @cached_property
    def _windows_of(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        # Every window of a split as a view (no copy): row s is tokens s..s+block-1 and
        # the targets are the same rows shifted by one, so a batch is one index_select.
        block = self.config.block_size
        train, val = self.data[: self.split], self.data[self.split :]
        return {
            name: (part[:-1].unfold(0, block, 1), part[1:].unfold(0, block, 1))
            for name, part in (("train", train), ("val", val))
        }

    def batch(self, rng: random.Random, batch_size: int, arch: Shape | str = Shape.DECODER_ONLY) -> Batch:
        """``batch_size`` random windows of the training split."""
        if as_shape(arch) is not Shape.DECODER_ONLY:
            raise ValueError("token-lm trains decoder-only models")
        windows_in, windows_out = self._windows_of["train"]
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        starts = torch.randint(0, len(windows_in), (batch_size,), generator=g)  # (B,)
        return _windows(windows_in, windows_out, starts)

    def val_batches(self, batch_size: int, max_batches: int) -> list[Batch]:
        """Deterministic validation batches: windows evenly spread over the validation split."""
        windows_in, windows_out = self._windows_of["val"]
        last = len(windows_in) - 1  # last window start
        available = last // self.config.block_size + 1  # non-overlapping windows that fit
        count = max(1, min(available, batch_size * max_batches))
        if count == 1:
            starts = torch.zeros(1, dtype=torch.long)
        else:
            starts = torch.linspace(0, last, count).round().long()  # (count,)
        return [_windows(windows_in, windows_out, chunk) for chunk in starts.split(batch_size)]

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """``(prompt, next few tokens)`` pairs from the validation split, as text."""
        rng = random.Random(f"held-out:{seed}")
        val = self.data[self.split :].tolist()
        prompt = max(1, self.config.block_size // 2)
        more = max(1, min(LM_CONTINUATION, self.config.block_size - prompt))
        pairs = []
        for _ in range(n):
            start = rng.randrange(0, len(val) - prompt - more + 1)
            mid = start + prompt
            pairs.append((self.tokenizer.decode(val[start:mid]), self.tokenizer.decode(val[mid : mid + more])))
        return pairs

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        """Openings of lines of the text (cut at a word), else the stock prompts."""
        try:
            text = self.text
        except ConfigError:  # the run's text is not on this machine
            return list(EXAMPLE_PROMPTS[:n])
        rng = random.Random(f"display:{seed}")
        lines = [ln.strip() for ln in text.splitlines()]
        lines = [ln for ln in lines if len(ln) >= 20 and ln[0].isalpha()]
        out: list[str] = []
        for line in rng.sample(lines, min(len(lines), 20 * n)):
            cut = line[:32]
            if " " in cut[8:]:
                cut = cut[: cut.rindex(" ") + 1].rstrip()
            if cut not in out and self.validate_input(cut) is None:
                out.append(cut)
            if len(out) == n:
                break
        return out or list(EXAMPLE_PROMPTS[:n])


def _windows(windows_in: torch.Tensor, windows_out: torch.Tensor, starts: torch.Tensor) -> Batch:
    tgt_in = windows_in.index_select(0, starts).long()  # (B, block)
    tgt_out = windows_out.index_select(0, starts).long()  # (B, block)
    return Batch(src=None, tgt_in=tgt_in, tgt_out=tgt_out, n_tokens=tgt_out.numel())
