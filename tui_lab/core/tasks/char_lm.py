"""Character-level language modelling: next-character prediction on a text."""

from __future__ import annotations

import math
import random

import torch

from tui_lab.core.config.error import field_error
from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks.base import (
    IGNORE,
    PAD_CHAR,
    Batch,
    TaskBase,
    as_shape,
    check_sequence_input,
    id_rows_to_tensor,
)
from tui_lab.core.tasks.text import default_text, read_text_file
from tui_lab.core.tasks.vocab import PAD, TEXT_VOCAB, Vocab

# Held-out pairs: the model continues a prompt by this many characters.
LM_CONTINUATION = 8


class CharLMTask(TaskBase):
    """Next-character prediction on a text (the default: Python's help text).

    The text is encoded once into a uint8 tensor; batches are random windows of
    ``block_size + 1`` characters from the training split (the first
    ``1 - val_fraction`` of the text), indexed in one tensor operation.
    """

    vocab = TEXT_VOCAB
    is_lm = True

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self.source = config.text or "<python help text>"
        self.text = read_text_file(config.text) if config.text else default_text()
        block = config.block_size
        split = int(len(self.text) * (1.0 - config.val_fraction))
        self.train_text = self.text[:split]
        self.val_text = self.text[split:]
        shortest = min(len(self.train_text), len(self.val_text))
        if shortest < block + 1:
            need = math.ceil((block + 1) / min(config.val_fraction, 1 - config.val_fraction))
            raise field_error(
                "task.text",
                f"{self.source} has {len(self.text):,} characters; with "
                f"block_size {block} and val_fraction {config.val_fraction} it needs "
                f"at least {need:,}"
            )
        # Ids of TEXT_VOCAB fit a byte: a quarter of the memory of int32, and
        # windows are widened to long only after they are cut out.
        self.data = _encode_bytes(self.vocab, self.text)  # (N,) uint8
        self.train_data = self.data[:split]
        self.val_data = self.data[split:]
        # Every window of the training split as a view (no copy): row s holds
        # characters s..s+block-1, and the targets are the same windows shifted
        # by one. A batch is then one index_select per tensor.
        self._train_in = self.train_data[:-1].unfold(0, block, 1)  # (N-block, block)
        self._train_out = self.train_data[1:].unfold(0, block, 1)  # (N-block, block)
        self._val_in = self.val_data[:-1].unfold(0, block, 1)
        self._val_out = self.val_data[1:].unfold(0, block, 1)
        # Held-out pairs: half a window of prompt, then a short continuation;
        # both fit in one window, which the split check above guarantees.
        self._prompt_len = max(1, block // 2)
        self.max_continuation = max(1, min(LM_CONTINUATION, block - self._prompt_len))

    def sample_input(self, rng: random.Random) -> str:
        return self.example(rng)[0]

    def example(self, rng: random.Random) -> tuple[str, str]:
        """A ``(prompt, continuation)`` pair from the training split."""
        return self._pair_at(self.train_text, rng)

    def _pair_at(self, text: str, rng: random.Random) -> tuple[str, str]:
        start = rng.randrange(0, len(text) - self._prompt_len - self.max_continuation + 1)
        mid = start + self._prompt_len
        return text[start:mid], text[mid : mid + self.max_continuation]

    def solve(self, input_text: str) -> str:
        """How the text itself continues ``input_text`` (empty if it never occurs)."""
        at = self.text.find(input_text) if input_text else -1
        if at < 0:
            return ""
        end = at + len(input_text)
        return self.text[end : end + self.max_continuation]

    def validate_input(self, text: str) -> str | None:
        return check_sequence_input(
            text, self.vocab, self.config.block_size,
            "type the start of a text for the model to continue", "type printable ASCII",
        )

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        """Openings of lines from the text, cut at a word boundary."""
        rng = random.Random(f"display:{seed}")
        lines = [ln.strip() for ln in self.text.splitlines()]
        lines = [ln for ln in lines if len(ln) >= 20 and ln[0].isalpha()]
        out: list[str] = []
        for line in rng.sample(lines, min(len(lines), 20 * n)):
            cut = line[: min(32, self.config.block_size)]
            if " " in cut[8:]:
                cut = cut[: cut.rindex(" ") + 1]
            if cut not in out and self.validate_input(cut) is None:
                out.append(cut)
            if len(out) == n:
                break
        return out

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """``(prompt, next few characters)`` pairs from the validation split."""
        rng = random.Random(f"held-out:{seed}")
        return [self._pair_at(self.val_text, rng) for _ in range(n)]

    def batch(self, rng: random.Random, batch_size: int, arch: Shape | str = Shape.DECODER_ONLY) -> Batch:
        """``batch_size`` random windows of the training split."""
        if as_shape(arch) is not Shape.DECODER_ONLY:
            raise ValueError("char-lm trains decoder-only models")
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        starts = torch.randint(0, len(self._train_in), (batch_size,), generator=g)  # (B,)
        return self._windows(self._train_in, self._train_out, starts)

    def val_batches(self, batch_size: int, max_batches: int) -> list[Batch]:
        """Deterministic validation batches: windows evenly spread over the validation split."""
        block = self.config.block_size
        last = len(self._val_in) - 1  # last window start
        available = last // block + 1  # non-overlapping windows that fit
        count = max(1, min(available, batch_size * max_batches))
        if count == 1:
            starts = torch.zeros(1, dtype=torch.long)
        else:
            starts = torch.linspace(0, last, count).round().long()  # (count,)
        return [
            self._windows(self._val_in, self._val_out, chunk) for chunk in starts.split(batch_size)
        ]

    @staticmethod
    def _windows(
        windows_in: torch.Tensor, windows_out: torch.Tensor, starts: torch.Tensor
    ) -> Batch:
        tgt_in = windows_in.index_select(0, starts).long()  # (B, block)
        tgt_out = windows_out.index_select(0, starts).long()  # (B, block)
        return Batch(src=None, tgt_in=tgt_in, tgt_out=tgt_out, n_tokens=tgt_out.numel())

    def collate(self, pairs: list[tuple[str, str]], arch: Shape | str = Shape.DECODER_ONLY) -> Batch:
        """Batch of ``prompt + continuation``; loss only where the continuation is predicted."""
        if as_shape(arch) is not Shape.DECODER_ONLY:
            raise ValueError("char-lm trains decoder-only models")
        if not pairs:
            raise ValueError("collate: no examples")
        ids = self.vocab.id_string
        rows_in, rows_out = [], []
        for prompt, continuation in pairs:
            seq = ids(prompt + continuation)
            cut = max(1, len(prompt))  # first predicted character (the continuation's)
            rows_in.append(seq[:-1])
            # tgt_out[j] predicts seq[j+1]; PAD marks "no loss" until masked_fill.
            rows_out.append(PAD_CHAR * (cut - 1) + seq[cut:])
        width = max(map(len, rows_out))
        both = id_rows_to_tensor(rows_in + rows_out, width)  # (2B, T)
        tgt_in, tgt_out = both.view(2, len(pairs), -1)  # (B, T) each
        tgt_out = tgt_out.masked_fill(tgt_out == PAD, IGNORE)
        n_tokens = sum(len(r) - r.count(PAD_CHAR) for r in rows_out)
        return Batch(None, tgt_in, tgt_out, n_tokens, examples=list(pairs))


def _encode_bytes(vocab: Vocab, text: str) -> torch.Tensor:
    """(N,) uint8 ids of ``text`` (vocabularies of up to 256 ids)."""
    if len(vocab) > 256:
        raise ValueError("char-lm vocabularies must have at most 256 ids")
    return torch.frombuffer(bytearray(vocab.id_string(text).encode("latin-1")), dtype=torch.uint8)
