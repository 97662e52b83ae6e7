"""Modular arithmetic, the grokking task: ``a b =`` -> ``(a op b) mod p``.

Every pair ``(a, b)`` of residues is one example, so the task is finite: a
fixed share of the pairs (``train_fraction``, drawn once from a seed made of
the task's settings) is the training set, the rest is held out, and
``held_out`` returns all of it (it is small). Power et al. (2022) showed a
small Transformer memorises such a training set quickly, then, driven by
weight decay, generalises to the held-out pairs thousands of steps later.

Each residue is one token (ids ``N_SPECIALS + n``) and SEP stands for ``=``;
the sequence is ``a b =`` and the loss and the answer are read at ``=``
only: there is no EOS, the answer is a single token. A typed input is two
numbers (``12 34``, ``12+34`` or ``12 + 34 =``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

import torch

from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks.base import IGNORE, Batch, TaskBase, as_shape
from tui_lab.core.tasks.vocab import N_SPECIALS, SEP, UNK, Vocab

SYMBOLS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}
_NUMBER = re.compile(r"\d+")
_TYPED = set("0123456789 \t=+-*/")


class NumberVocab(Vocab):
    """One token per residue 0..p-1 after the specials; text is numbers separated by spaces.

    The base class's characters are private-use code points that never meet
    the user: ``encode`` reads numbers out of typed text, ``decode`` writes
    them back, and axis labels show the numbers (and ``=`` for SEP).
    """

    def __init__(self, p: int) -> None:
        super().__init__("".join(chr(0xE000 + n) for n in range(p)))
        self.p = p

    def encode(self, text: str) -> list[int]:
        """The residues in ``text`` as ids (a number outside 0..p-1 becomes UNK).

        Text made of the vocabulary's own characters encodes as in every ``Vocab``.
        """
        if text and all(c in self for c in text):
            return super().encode(text)
        return [N_SPECIALS + n if n < self.p else UNK for n in map(int, _NUMBER.findall(text))]

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """The residues among ``ids`` as numbers separated by spaces (specials dropped)."""
        values = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        return " ".join(str(int(i) - N_SPECIALS) for i in values if N_SPECIALS <= int(i) < len(self))

    def label(self, id: int) -> str:
        """The number for a residue's id, ``=`` for SEP, else the special's label."""
        id = int(id)
        if id == SEP:
            return "="
        if N_SPECIALS <= id < len(self):
            return str(id - N_SPECIALS)
        return super().label(id)

    def unknown_chars(self, text: str) -> list[str]:
        """Characters that cannot be part of a typed ``a b`` (digits, spaces, signs and = can)."""
        return list(dict.fromkeys(c for c in text if c not in _TYPED))


def combine(a: int, b: int, operation: str, p: int) -> int:
    """``(a op b) mod p``; divide is ``a * b^-1`` (b != 0, p prime)."""
    if operation == "add":
        return (a + b) % p
    if operation == "subtract":
        return (a - b) % p
    if operation == "multiply":
        return (a * b) % p
    return (a * pow(b, -1, p)) % p


class ModularTask(TaskBase):
    """``(a op b) mod p`` over every pair; see the module docstring."""

    # evaluation: with a one-token answer and no EOS, the teacher-forced argmax
    # at "=" is exactly the greedy answer, so exact match needs one forward pass.
    exact_from_forward = True

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self.p = config.p
        self.operation = config.operation
        self.vocab = NumberVocab(config.p)
        low = 1 if config.operation == "divide" else 0
        pairs = [(a, b) for a in range(config.p) for b in range(low, config.p)]
        # One split per setting (never per training seed): every seed of a sweep
        # arm learns the same pairs and is judged on the same held-out ones.
        random.Random(f"modular:{config.p}:{config.operation}:{config.train_fraction}").shuffle(pairs)
        n_train = min(len(pairs) - 1, max(1, round(config.train_fraction * len(pairs))))
        self._train = pairs[:n_train]
        self._held = pairs[n_train:]

    # -- the split -------------------------------------------------------------
    def training_set(self) -> list[tuple[str, str]]:
        """Every training pair as (input, answer) text; ``train.full_batch`` uses it whole."""
        return [self._pair(a, b) for a, b in self._train]

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """The held-out pairs: all of them, or the first ``n`` when ``n`` is smaller."""
        return [self._pair(a, b) for a, b in self._held[:n]]

    def input_space_size(self) -> int:
        return len(self._train) + len(self._held)

    def _pair(self, a: int, b: int) -> tuple[str, str]:
        return f"{a} {b}", str(combine(a, b, self.operation, self.p))

    # -- text ------------------------------------------------------------------
    def sample_input(self, rng: random.Random) -> str:
        """A random training input (held-out pairs are never drawn for training)."""
        a, b = rng.choice(self._train)
        return f"{a} {b}"

    def sample_inputs(self, rng: random.Random, n: int) -> list[str]:
        return [f"{a} {b}" for a, b in rng.choices(self._train, k=n)]

    def solve(self, input_text: str) -> str:
        a, b = (int(x) for x in _NUMBER.findall(input_text)[:2])
        return str(combine(a, b, self.operation, self.p))

    def validate_input(self, text: str) -> str | None:
        p, sign = self.p, SYMBOLS[self.operation]
        hint = f"type two numbers below {p}, e.g. 12 {sign} 34"
        bad = [c for c in dict.fromkeys(text) if c not in _TYPED]
        if bad:
            return f"{', '.join(repr(c) for c in bad[:3])} not allowed here: {hint}"
        numbers = [int(x) for x in _NUMBER.findall(text)]
        if len(numbers) != 2:
            return f"{len(numbers)} number(s): {hint}"
        big = [x for x in numbers if x >= p]
        if big:
            return f"{big[0]} is not a residue mod {p}: {hint}"
        if self.operation == "divide" and numbers[1] == 0:
            return "division by 0: the divisor must be 1 or more"
        return None

    def _classic_inputs(self) -> list[str]:
        return [f"{a} {b}" for a, b in self._held[:2]] + [f"{a} {b}" for a, b in self._train[:2]]

    # -- batches ---------------------------------------------------------------
    def collate(self, pairs: list[tuple[str, str]], arch: Shape | str) -> Batch:
        """``a b =`` rows; the loss is taken at ``=`` only, on the answer token."""
        if as_shape(arch) is not Shape.DECODER_ONLY:
            raise ValueError("modular-addition trains decoder-only models")
        if not pairs:
            raise ValueError("collate: no examples")
        encode = self.vocab.encode
        rows = [[*encode(i)[:2], SEP] for i, _ in pairs]
        tgt_in = torch.tensor(rows, dtype=torch.long)  # (B, 3)
        tgt_out = torch.full_like(tgt_in, IGNORE)  # (B, 3)
        tgt_out[:, -1] = torch.tensor([encode(a)[0] for _, a in pairs])
        return Batch(None, tgt_in, tgt_out, len(pairs), examples=list(pairs))
