"""Induction: random tokens in which a random-length prefix repeats right after itself.

A sequence of ``block_size + 1`` tokens is a prefix ``P`` of ``min_len..max_len``
random tokens, ``P`` again, then random filler. Loss and accuracy are taken
only on the repeat's tokens after its first (``P[1:]`` in the second copy):
the first token of the repeat cannot be known, since the prefix's length is
random, but every later one can be read off the first copy by an induction
head (look back for the current token, copy the token that followed it;
Olsson et al. 2022). The length varies from sequence to sequence on purpose:
with a fixed length a single layer solves the task with a fixed-offset
positional head, which is not an induction head.

Tokens are 32 letters (``a-z`` then ``A-F``) so a decode prompt can be typed.
The task behaves as a language model (``is_lm``: no SEP, no exact-match
pairs); ``scores_tokens`` tells evaluation to report the accuracy on the
repeated tokens in place of exact match.
"""

from __future__ import annotations

import random

import torch

from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks.base import IGNORE, Batch, TaskBase, as_shape, check_sequence_input
from tui_lab.core.tasks.vocab import N_SPECIALS, Vocab

INDUCTION_VOCAB = Vocab("abcdefghijklmnopqrstuvwxyzABCDEF")
VAL_SEED = 9_999_991  # validation sequences never share the training stream


class InductionTask(TaskBase):
    """Repeated random prefixes; see the module docstring."""

    vocab = INDUCTION_VOCAB
    is_lm = True
    scores_tokens = True

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self.max_continuation = config.max_len
        self._val: list[Batch] | None = None

    # -- sequences ---------------------------------------------------------------
    def sequences(self, rng: random.Random, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, block_size + 1) token ids and (n,) prefix lengths, drawn only from ``rng``."""
        c = self.config
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        width = c.block_size + 1
        ids = torch.randint(N_SPECIALS, len(self.vocab), (n, width), generator=g)  # (n, W)
        lengths = torch.randint(c.min_len, c.max_len + 1, (n,), generator=g)  # (n,)
        pos = torch.arange(width).unsqueeze(0)  # (1, W)
        in_repeat = (pos >= lengths[:, None]) & (pos < 2 * lengths[:, None])  # (n, W)
        source = torch.where(in_repeat, pos - lengths[:, None], pos)  # repeat reads the prefix
        return ids.gather(1, source), lengths

    def _batch_of(self, seqs: torch.Tensor, lengths: torch.Tensor) -> Batch:
        tgt_in, tgt_out = seqs[:, :-1], seqs[:, 1:].clone()  # (B, T) each
        # tgt_out[j] predicts seqs[j + 1]; keep seqs[L + 1 .. 2L - 1], i.e. j in [L, 2L - 2].
        j = torch.arange(tgt_out.size(1)).unsqueeze(0)  # (1, T)
        keep = (j >= lengths[:, None]) & (j <= 2 * lengths[:, None] - 2)
        tgt_out = tgt_out.masked_fill(~keep, IGNORE)
        return Batch(None, tgt_in, tgt_out, int(keep.sum()))

    def batch(self, rng: random.Random, batch_size: int, arch: Shape | str = Shape.DECODER_ONLY) -> Batch:
        if as_shape(arch) is not Shape.DECODER_ONLY:
            raise ValueError("induction trains decoder-only models")
        return self._batch_of(*self.sequences(rng, batch_size))

    def val_batches(self, batch_size: int, max_batches: int) -> list[Batch]:
        """The same validation sequences on every call (``max_batches`` of ``batch_size``)."""
        rng = random.Random(VAL_SEED)
        return [self._batch_of(*self.sequences(rng, batch_size)) for _ in range(max_batches)]

    def probe(self, n: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """A fixed batch of sequences (ids (n, block_size), prefix lengths) for head scores."""
        seqs, lengths = self.sequences(random.Random(f"probe:{seed}"), n)
        return seqs[:, :-1], lengths

    # -- the text interface (decode, the UI's examples) -------------------------
    def sample_input(self, rng: random.Random) -> str:
        seqs, lengths = self.sequences(rng, 1)
        cut = int(lengths[0]) + 1  # the prefix and the first token of its repeat
        return self.vocab.decode(seqs[0, :cut].tolist())

    def solve(self, input_text: str) -> str:
        """The repeat's rest, if ``input_text`` is a prefix plus the first token of its repeat."""
        for length in range(self.config.min_len, self.config.max_len + 1):
            if len(input_text) == length + 1 and input_text[0] == input_text[length]:
                return input_text[1:length]
        return ""

    def validate_input(self, text: str) -> str | None:
        return check_sequence_input(
            text, self.vocab, self.config.block_size,
            "type some letters, then repeat their start, e.g. abcdefgab", "type letters a-z or A-F",
        )

    def _classic_inputs(self) -> list[str]:
        return ["kqzfbxmdwkq", "pythonlabpyt"]

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        rng = random.Random(f"held-out:{seed}")
        return [self.example(rng) for _ in range(n)]
