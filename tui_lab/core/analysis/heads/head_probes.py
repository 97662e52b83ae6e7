"""The fixed probe batches heads are scored on, and where a task says outputs come from.

Two kinds of probe, named in every score (``HeadScore.probes``):

- ``task``: a lab run's own task (``make_probe(task, arch, n, seed)``): the
  model's inputs, which query positions count (not padding) and the task's
  true alignment as boolean (query, key) target sets;
- ``repeat``: the standard probe for any decoder-only model, with or without a
  task (``standard_probe(vocab_size, special_ids, ...)``): blocks of random
  tokens from the model's own vocabulary, each repeated once right after
  itself, as TransformerLens's ``detect_head`` scores induction;
- ``task-repeats``: the induction task's own repeats (of varying length, with
  filler after them), used in place of ``repeat`` for its runs.

The same arguments give the same probe, so scores from two snapshots of a run
are comparable.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks.base import Batch, TaskBase
from tui_lab.core.tasks.induction import InductionTask
from tui_lab.core.tasks.protocol import Task
from tui_lab.core.tasks.tokenized import Tokenizer
from tui_lab.core.tasks.vocab import N_SPECIALS, PAD

ALIGNED_TASKS = ("copy", "reverse", "sort", "addition")
TASK = "task"
REPEAT = "repeat"
TASK_REPEATS = "task-repeats"


@runtime_checkable
class ValidationWindows(Protocol):
    """A language model's task that cuts its validation text into batches (char-lm,
    induction, masked-lm, token-lm): a probe reads the first."""

    def val_batches(self, batch_size: int, max_batches: int) -> list[Batch]: ...


@runtime_checkable
class Tokenized(Protocol):
    """A real model's task (its text, a translator's, an encoder's): it reads through a tokenizer."""

    @property
    def tokenizer(self) -> Tokenizer: ...


def alignment_sets(task: str, text: str, answer: str) -> list[list[int]]:
    """For each output character, the input positions it comes from ([] when none does).

    copy: output i from input i; reverse: from n-1-i; sort: every position
    holding that digit; addition ``a+b``: the digits of a and b in the same
    column (the sum's extra leading digit, a carry, has none).
    """
    n = len(text)
    if task == "copy":
        return [[i] if i < n else [] for i in range(len(answer))]
    if task == "reverse":
        return [[n - 1 - i] if i < n else [] for i in range(len(answer))]
    if task == "sort":
        return [[j for j, c in enumerate(text) if c == d] for d in answer]
    if task == "addition":
        a, _, b = text.partition("+")
        out: list[list[int]] = []
        for i in range(len(answer)):
            place = len(answer) - 1 - i  # 0 = units
            cols = []
            if place < len(a):
                cols.append(len(a) - 1 - place)
            if place < len(b):
                cols.append(len(a) + 1 + len(b) - 1 - place)
            out.append(cols)
        return out
    return []


@dataclass(frozen=True)
class RepeatProbe:
    """Rows whose first ``lengths[b]`` tokens are repeated once right after themselves."""

    tokens: torch.Tensor  # (B, T), T >= 2L: tokens[b, L:2L] == tokens[b, :L]
    lengths: torch.Tensor  # (B,) the block's length L per row
    kind: str  # REPEAT (standard_probe) or TASK_REPEATS (a task's own)
    description: str  # one line for the output: what the rows are


@dataclass(frozen=True)
class Probe:
    """Inputs to the model and what the scores need to read its attention."""

    inputs: tuple[torch.Tensor, ...]  # (src, tgt_in) or (tokens,)
    src_valid: torch.Tensor | None  # (B, S) bool: source positions that are not padding
    tgt_valid: torch.Tensor  # (B, T) bool
    alignment: torch.Tensor | None  # (B, T, S) cross, or (B, T, T) decoder-only self
    shape: Shape
    repeated: RepeatProbe | None  # decoder-only models: the rows for the repeat patterns
    description: str = ""  # one line for the output: which examples of which task

    def queries_for(self, name: str) -> torch.Tensor:
        """(B, Tq) bool: the query rows of module ``name`` that count."""
        if name.startswith("encoder.") and self.src_valid is not None:
            return self.src_valid
        return self.tgt_valid

    def alignment_for(self, name: str) -> torch.Tensor | None:
        """The true alignment's (B, Tq, Tk) targets for module ``name``, if the task has one."""
        if self.alignment is None:
            return None
        wanted = ".self" if self.shape.one_stack else ".cross"
        return self.alignment if name.startswith("decoder.") and name.endswith(wanted) else None


def _alignment(task: Task, pairs: list[tuple[str, str]], t_q: int, t_k: int, shape: Shape) -> torch.Tensor:
    """(B, Tq, Tk) targets: the query that predicts output i -> its input positions.

    Encoder-decoder: query i (BOS + answer[:i]) predicts output i, keys are
    the source. Decoder-only (``input SEP answer``): the query at
    len(input) + i (SEP, then the answer) predicts it, keys are the input.
    """
    out = torch.zeros(len(pairs), t_q, t_k, dtype=torch.bool)
    for b, (text, answer) in enumerate(pairs):
        first = len(text) if shape.one_stack else 0
        for i, keys in enumerate(alignment_sets(task.name, text, answer)):
            if first + i < t_q:
                for k in keys:
                    out[b, first + i, k] = True
    return out


def standard_probe(
    vocab_size: int, special_ids: Iterable[int], n: int = 8, length: int = 32, seed: int = 0
) -> RepeatProbe:
    """``n`` rows of ``length`` distinct random tokens, each row's block repeated once right after.

    Tokens are drawn from ``0..vocab_size-1`` less ``special_ids`` (a BOS or
    EOS inside the probe would change what the model does), without
    replacement within a row, so the repeat is the only place a token comes
    back and each pattern's target is a single key. A vocabulary with fewer
    ordinary tokens than ``length`` gets shorter blocks. Seeded: the same
    arguments give the same rows.
    """
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    specials = sorted({i for i in special_ids if 0 <= i < vocab_size})
    allowed[specials] = False
    ids = allowed.nonzero().flatten()  # (V',) the ordinary token ids
    length = min(length, ids.numel())
    if length < 2:
        raise ValueError(f"a repeat probe needs 2 ordinary tokens; the vocabulary has {ids.numel()}")
    g = torch.Generator().manual_seed(seed)
    picks = torch.multinomial(torch.ones(n, ids.numel()), length, replacement=False, generator=g)
    block = ids[picks]  # (n, L)
    description = (
        f"{n} blocks of {length} distinct random tokens from the vocabulary's {ids.numel()} "
        f"ordinary ids ({len(specials)} special ids left out), each repeated once; seed {seed}"
    )
    return RepeatProbe(torch.cat([block, block], dim=1), torch.full((n,), length), REPEAT, description)


def _task_repeats(task: Task, n: int, seed: int, max_len: int) -> RepeatProbe:
    """The repeat rows for a lab task: the induction task's own, else the standard probe."""
    if isinstance(task, InductionTask):  # its own variable-length repeats
        tokens, lengths = task.probe(n, seed)
        lo, hi = int(lengths.min()), int(lengths.max())
        description = f"{task.name}: {n} of its sequences, a block of {lo}-{hi} tokens repeated once, then filler"
        return RepeatProbe(tokens, lengths, TASK_REPEATS, description)
    specials = range(N_SPECIALS)  # the lab's vocabularies put their specials first
    return standard_probe(len(task.vocab), specials, n, max(2, min(16, max_len // 2)), seed)


def make_probe(task: Task, arch: Shape | str, n: int = 64, seed: int = 0, max_len: int = 64) -> Probe:
    """The fixed probe for ``task`` on a model of shape ``arch`` (a ``Shape`` or its spelling
    in a preset; see the module docstring): a language model's validation windows, or a
    lab task's held-out examples."""
    shape = Shape(arch)
    repeated = _task_repeats(task, n, seed, max_len) if shape is Shape.DECODER_ONLY else None
    if task.is_lm:
        if not isinstance(task, ValidationWindows):
            raise TypeError(f"{task.name} has no validation windows to probe")
        tokens = task.val_batches(n, 1)[0].tgt_in  # (B, T)
        valid = torch.ones_like(tokens, dtype=torch.bool)
        about = f"{task.name}: {n} validation sequences of {tokens.size(1)} tokens"
        return Probe((tokens,), None, valid, None, shape, repeated, about)
    if not isinstance(task, TaskBase):
        raise TypeError(f"{task.name} has no held-out examples of its own to probe")
    about = f"{task.name}: {n} held-out examples, seed {seed}"
    pairs = task.held_out(n, random.Random(f"probe:{seed}").getrandbits(32))
    batch = task.collate(pairs, shape.value)
    tgt_valid = batch.tgt_in != PAD
    aligned = task.name in ALIGNED_TASKS
    if batch.src is not None and shape is Shape.ENCODER_DECODER:
        src_valid = batch.src != PAD
        align = _alignment(task, pairs, batch.tgt_in.size(1), batch.src.size(1), shape) if aligned else None
        return Probe((batch.src, batch.tgt_in), src_valid, tgt_valid, align, shape, None, about)
    t = batch.tgt_in.size(1)
    align = _alignment(task, pairs, t, t, shape) if aligned else None
    return Probe((batch.tgt_in,), None, tgt_valid, align, shape, repeated, about)
