"""What decoding, the analyses and the lab ask of any task: the ``Task`` protocol.

Every task implements it: the lab's own (``TaskBase`` and its subclasses in
``digits``, ``char_lm``, ``induction``, ``modular``) and a real model's
(``TokenizedText``, ``TokenLMTask``, ``Translation``). Training asks more of a
task (batches, held-out pairs): that is ``TaskBase``'s, and ``TokenLMTask``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import random

    from tui_lab.core.config.shape import Shape
    from tui_lab.core.tasks.base import Batch


class Vocabulary(Protocol):
    """Ids to text and back: the lab's ``Vocab`` or a real tokenizer's ``TokenVocab``."""

    def __len__(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str: ...

    def label(self, id: int) -> str: ...

    def unknown_chars(self, text: str) -> list[str]: ...


class ValidationBatches(Protocol):
    """A language-model task's validation text in batches (``is_lm`` tasks have it)."""

    def val_batches(self, batch_size: int, max_batches: int) -> list[Batch]: ...


@runtime_checkable
class Task(Protocol):
    """A task as decoding and the panes see it."""

    @property
    def name(self) -> str:
        """The task's name (``copy``, ``char-lm``, ``token-lm``, ``translation``...)."""
        ...

    @property
    def vocab(self) -> Vocabulary:
        """Its vocabulary (a real model's: its tokenizer)."""
        ...

    @property
    def is_lm(self) -> bool:
        """A language model's task: the answer continues the input."""
        ...

    @property
    def truncates_prompt(self) -> bool:
        """A prompt longer than the context is cut to its end (False: refused in one line)."""
        ...

    @property
    def eos_id(self) -> int | None:
        """The id that ends an answer (None: the answer runs to its length)."""
        ...

    @property
    def banned_ids(self) -> tuple[int, ...]:
        """Ids the decoder never emits (a translator's pad id)."""
        ...

    @property
    def decoder_start_id(self) -> int:
        """The id an encoder-decoder's decoder starts from."""
        ...

    def validate_input(self, text: str) -> str | None:
        """None if the model can be asked ``text``, else a one-line reason."""
        ...

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        """A few inputs to offer in the UI."""
        ...

    def solve(self, input_text: str) -> str:
        """The reference answer ("" where there is none: a real text)."""
        ...


class TrainingTask(Task, Protocol):
    """What training asks of a task: ``TaskBase`` and its subclasses, and ``TokenLMTask``."""

    @property
    def scores_tokens(self) -> bool:
        """Evaluation reports the scored tokens' accuracy as the run's (induction, masked-lm)."""
        ...

    def batch(self, rng: random.Random, batch_size: int, arch: Shape | str) -> Batch:
        """A training batch of ``batch_size`` rows for a model of shape ``arch``."""
        ...

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """``n`` held-out (input, answer) pairs, the same for a seed."""
        ...


class PairTask(TrainingTask, Protocol):
    """A task of (input, answer) pairs (``TaskBase``): what evaluation and a full batch collate."""

    @property
    def exact_from_forward(self) -> bool:
        """A fixed one-token answer: the teacher-forced argmax is the greedy answer."""
        ...

    def collate(self, pairs: list[tuple[str, str]], arch: Shape | str) -> Batch:
        """``pairs`` as one batch."""
        ...

    def training_set(self) -> list[tuple[str, str]] | None:
        """Every training pair (None: no finite set)."""
        ...
