"""The fixed probe batch a run's heads are scored on, and where its task says outputs come from.

``make_probe(task, arch, n, seed)`` gives the model's inputs, which query
positions count (not padding), the task's true alignment as boolean
(query, key) target sets, and, for decoder-only models, repeated random
sequences for the induction score. The same arguments give the same probe, so
scores from two snapshots of a run are comparable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from tui_lab.core.tasks.vocab import N_SPECIALS, PAD

ALIGNED_TASKS = ("copy", "reverse", "sort", "addition")


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
class Probe:
    """Inputs to the model and what the scores need to read its attention."""

    inputs: tuple[torch.Tensor, ...]  # (src, tgt_in) or (tokens,)
    src_valid: torch.Tensor | None  # (B, S) bool: source positions that are not padding
    tgt_valid: torch.Tensor  # (B, T) bool
    alignment: torch.Tensor | None  # (B, T, S) cross, or (B, T, T) decoder-only self
    arch: str
    repeated: tuple[torch.Tensor, torch.Tensor] | None  # (B, 2L) tokens, (B,) prefix lengths

    def queries_for(self, name: str) -> torch.Tensor:
        """(B, Tq) bool: the query rows of module ``name`` that count."""
        if name.startswith("encoder.") and self.src_valid is not None:
            return self.src_valid
        return self.tgt_valid

    def alignment_for(self, name: str) -> torch.Tensor | None:
        """The true alignment's (B, Tq, Tk) targets for module ``name``, if the task has one."""
        if self.alignment is None:
            return None
        wanted = ".cross" if self.arch == "encoder-decoder" else ".self"
        return self.alignment if name.startswith("decoder.") and name.endswith(wanted) else None


def _alignment(task: Any, pairs: list[tuple[str, str]], t_q: int, t_k: int, arch: str) -> torch.Tensor:
    """(B, Tq, Tk) targets: the query that predicts output i -> its input positions.

    Encoder-decoder: query i (BOS + answer[:i]) predicts output i, keys are
    the source. Decoder-only (``input SEP answer``): the query at
    len(input) + i (SEP, then the answer) predicts it, keys are the input.
    """
    out = torch.zeros(len(pairs), t_q, t_k, dtype=torch.bool)
    for b, (text, answer) in enumerate(pairs):
        first = 0 if arch == "encoder-decoder" else len(text)
        for i, keys in enumerate(alignment_sets(task.name, text, answer)):
            if first + i < t_q:
                for k in keys:
                    out[b, first + i, k] = True
    return out


def repeated_tokens(vocab_size: int, n: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 2 * length) random ordinary tokens, each row's first half repeated; (n,) lengths."""
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(N_SPECIALS, vocab_size, (n, length), generator=g)
    return torch.cat([half, half], dim=1), torch.full((n,), length)


def make_probe(task: Any, arch: str, n: int = 64, seed: int = 0, max_len: int = 64) -> Probe:
    """The fixed probe for ``task`` on a model of ``arch`` (see the module docstring)."""
    repeated = None
    if arch == "decoder-only":
        if hasattr(task, "probe"):  # the induction task: its own variable-length repeats
            repeated = task.probe(n, seed)
        else:
            repeated = repeated_tokens(len(task.vocab), n, max(2, min(16, max_len // 2)), seed)
    if task.is_lm:
        tokens = task.val_batches(n, 1)[0].tgt_in  # (B, T)
        valid = torch.ones_like(tokens, dtype=torch.bool)
        return Probe((tokens,), None, valid, None, arch, repeated)
    pairs = task.held_out(n, random.Random(f"probe:{seed}").getrandbits(32))
    batch = task.collate(pairs, arch)
    tgt_valid = batch.tgt_in != PAD
    aligned = task.name in ALIGNED_TASKS
    if arch == "encoder-decoder":
        src_valid = batch.src != PAD
        align = _alignment(task, pairs, batch.tgt_in.size(1), batch.src.size(1), arch) if aligned else None
        return Probe((batch.src, batch.tgt_in), src_valid, tgt_valid, align, arch, None)
    t = batch.tgt_in.size(1)
    align = _alignment(task, pairs, t, t, arch) if aligned else None
    return Probe((batch.tgt_in,), None, tgt_valid, align, arch, repeated)
