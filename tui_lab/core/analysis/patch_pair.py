"""A clean / corrupted pair of inputs, two answers, and the metric patching reads.

Activation patching asks which activations carry the difference between two
runs of the model on inputs of the same token length: a **clean** input whose
right answer the model gives (``answer``), and a **corrupted** one that makes
it lean to another token (``wrong``). The metric is the logit difference
``logit[answer] - logit[wrong]`` at the last position; ``normalise`` maps it so
that 0 is the corrupted run and 1 the clean run (TransformerLens's IOI demo).

Ready-made pairs (``ready_pair``):

- ``ioi``, for models opened from files: "When Mary and John went to the store,
  John gave a drink to" -> " Mary" / " John", the names swapped for the
  corruption (Wang et al. 2022);
- ``task``, for the lab's runs: a pair from the run's own task. Induction: a
  random block, then the start of its repeat; the corruption changes the first
  copy, so the answer (the repeated token) can no longer be read off it and the
  wrong answer is the token the changed copy would predict. A decoder-only
  sequence task (copy, reverse, sort, addition): two inputs of one length whose
  answers start with different tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from tui_lab.core.errors import LabError


class PatchError(LabError):
    """Input patching cannot take (lengths, answers, sites, model kinds); one line."""


@dataclass(frozen=True)
class PatchPair:
    """Token ids of the clean and corrupted inputs (same length), and the two answer ids."""

    clean: list[int]
    corrupt: list[int]
    answer: int
    wrong: int
    name: str = "custom"

    def __post_init__(self) -> None:
        if len(self.clean) != len(self.corrupt):
            raise PatchError(
                f"the clean input is {len(self.clean)} tokens and the corrupted one "
                f"{len(self.corrupt)}: patching needs the same length"
            )
        if not self.clean:
            raise PatchError("empty input: give some text")

    @property
    def length(self) -> int:
        return len(self.clean)

    def ids(self, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
        """(1, T) clean and corrupted ids."""
        return (
            torch.tensor([self.clean], device=device),
            torch.tensor([self.corrupt], device=device),
        )


def logit_diff(logits: Tensor, answer: int, wrong: int | None) -> Tensor:
    """(B,) ``logit[answer] - logit[wrong]`` at the last position (the answer's logit
    alone when ``wrong`` is None)."""
    last = logits[:, -1].float()  # (B, V)
    return last[:, answer] if wrong is None else last[:, answer] - last[:, wrong]


@dataclass(frozen=True)
class Metric:
    """The clean and corrupted runs' logit differences; ``normalise``: 0 corrupted, 1 clean."""

    clean: float
    corrupt: float

    def normalise(self, value: Tensor) -> Tensor:
        span = self.clean - self.corrupt
        if abs(span) < 1e-12:
            return torch.zeros_like(value)
        return (value - self.corrupt) / span


def _vocab(model: Any) -> Any:
    return model.task.vocab


def _bos_id(model: Any) -> int | None:
    tokenizer = getattr(_vocab(model), "tokenizer", None)
    return getattr(tokenizer, "bos_id", None)


def encode_text(model: Any, text: str) -> list[int]:
    """``text``'s ids as the model reads it (with the special tokens its tokenizer adds)."""
    ids = list(_vocab(model).encode(text))
    if not ids:
        raise PatchError("empty input: give some text")
    return ids


def single_token(model: Any, text: str, what: str = "answer") -> int:
    """The one token id of ``text`` (a tokenizer's leading BOS left out); PatchError
    naming the pieces when it is more or less than one token."""
    vocab = _vocab(model)
    ids = list(vocab.encode(text))
    bos = _bos_id(model)
    if len(ids) > 1 and bos is not None and ids[0] == bos:
        ids = ids[1:]
    if len(ids) != 1:
        pieces = " ".join(repr(vocab.label(int(i))) for i in ids) or "nothing"
        raise PatchError(f"the {what} {text!r} is {len(ids)} tokens ({pieces}): give one token")
    return int(ids[0])


def make_pair(model: Any, clean: str, corrupt: str, answer: str, wrong: str) -> PatchPair:
    """A pair from text: the two inputs (same token length) and one-token answers."""
    a, c = encode_text(model, clean), encode_text(model, corrupt)
    if len(a) != len(c):  # before the answers: the lengths are the first thing to fix
        return PatchPair(a, c, 0, 0)  # raises, naming both lengths
    return PatchPair(a, c, single_token(model, answer), single_token(model, wrong, "wrong answer"))


IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPT = "When John and Mary went to the store, Mary gave a drink to"


def ioi_pair(model: Any) -> PatchPair:
    """The IOI template: " Mary" over " John", names swapped for the corruption."""
    pair = make_pair(model, IOI_CLEAN, IOI_CORRUPT, " Mary", " John")
    return PatchPair(pair.clean, pair.corrupt, pair.answer, pair.wrong, "ioi")


def induction_pair(model: Any, block: int = 8, shown: int = 3, seed: int = 0) -> PatchPair:
    """A random block of ``block`` distinct tokens, then its first ``shown`` tokens
    again; the answer is the block's next token. The corruption replaces the first
    copy with other tokens, so the wrong answer is what that copy would predict."""
    vocab = _vocab(model)
    letters = list(getattr(vocab, "chars", "")) or []
    if len(letters) < 2 * block:
        raise PatchError("the induction pair needs a vocabulary of letters (an induction run)")
    rng = random.Random(f"induction-pair:{seed}")
    picked = rng.sample(letters, 2 * block)
    first, other = picked[:block], picked[block:]
    clean = "".join(first) + "".join(first[:shown])
    corrupt = "".join(other) + "".join(first[:shown])
    return PatchPair(
        encode_text(model, clean), encode_text(model, corrupt),
        single_token(model, first[shown]), single_token(model, other[shown], "wrong answer"), "induction",
    )


def sequence_task_pair(model: Any, seed: int = 0, tries: int = 2000) -> PatchPair:
    """Two inputs of the task with one token length whose answers start differently,
    as a decoder-only model reads them (input then SEP); the answer's first token."""
    from tui_lab.core.tasks.vocab import SEP

    task, vocab = model.task, _vocab(model)
    rng = random.Random(f"task-pair:{seed}")
    first_in, first_out = task.example(rng)
    for _ in range(tries):  # a first input of a few tokens, where the task allows it
        if len(first_in) >= 3:
            break
        first_in, first_out = task.example(rng)
    a = [*vocab.encode(first_in), SEP]
    for _ in range(tries):
        text, out = task.example(rng)
        b = [*vocab.encode(text), SEP]
        if len(b) == len(a) and out and first_out and out[0] != first_out[0]:
            return PatchPair(a, b, vocab.encode(first_out)[0], vocab.encode(out)[0], task.config.name)
    raise PatchError(f"no pair of {task.config.name} inputs with one length and different answers")


def ready_pairs(model: Any) -> list[str]:
    """The names of the ready-made pairs this model can take."""
    if getattr(model, "card", None) is not None:
        return ["ioi"]
    name = model.task.config.name
    if name == "induction":
        return ["induction"]
    if not model.task.is_lm:
        return [name]
    return []


def ready_pair(model: Any, name: str | None = None) -> PatchPair:
    """A ready-made pair by name (None: the model's first); PatchError when it has none."""
    names = ready_pairs(model)
    if name is None:
        if not names:
            raise PatchError(
                "no ready-made pair for this task: give --clean, --corrupt, --answer and --wrong"
            )
        name = names[0]
    if name == "task" and names:
        name = names[0]
    if name == "ioi" and "ioi" in names:
        return ioi_pair(model)
    if name == "induction" and "induction" in names:
        return induction_pair(model)
    if name in names:
        return sequence_task_pair(model)
    offered = ", ".join(names) or "none"
    raise PatchError(f"no ready-made pair {name!r} for this model (offered: {offered})")
