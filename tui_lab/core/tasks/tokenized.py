"""Text through a real model's own tokenizer: the task of a model opened from files.

A model opened with ``--model`` comes with no task of the lab's: it was
trained elsewhere, on text, with its own tokenizer (byte-level BPE and the
like). ``TokenizedText`` is what decoding, the attention views, the lens and
ablation need from a task for such a model: the tokenizer seen as the lab's
vocabulary (``TokenVocab``: encode, decode, readable labels), the end-of-text
id that stops a continuation, and a check that a prompt fits the context.
The tokenizer is duck-typed (``Tokenizer``), so this layer does not depend on
where it was read from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from tui_lab.core.tasks.vocab import BOS

# Prompts the Decode pane offers for a real model: plain English openings of the
# kind small models are studied on (a story, a fact, a repetition an induction
# head can continue).
EXAMPLE_PROMPTS = (
    "The cat sat on the",
    "Once upon a time, there was a little",
    "The capital of France is",
    "one two three four five six",
    "Alice and Bob went to the park. Alice gave the ball to",
)


class Tokenizer(Protocol):
    """What the lab calls on a real model's tokenizer (``core/pretrained/tokenizer.py``)."""

    eos_id: int | None
    bos_id: int | None

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def label(self, id: int) -> str: ...

    def __len__(self) -> int: ...


class TokenVocab:
    """A tokenizer in the shape of the lab's ``Vocab`` (encode, decode, label, unknown_chars)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return len(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """The text of ``ids``; with ``stop_at_eos``, everything from the first end-of-text on is left out."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        kept = [int(i) for i in ids]
        eos = self.tokenizer.eos_id
        if stop_at_eos and eos is not None and eos in kept:
            kept = kept[: kept.index(eos)]
        return self.tokenizer.decode(kept)

    def label(self, id: int) -> str:
        return self.tokenizer.label(int(id))

    def unknown_chars(self, text: str) -> list[str]:
        """Always empty: a byte-level tokenizer has a piece for every character."""
        return []


class TokenizedText:
    """The task of a real model: continue a text, token by token, within the model's context."""

    name = "token-lm"
    is_lm = True
    # A prompt longer than the context is refused in one line, not cut: which end
    # to keep is the user's choice for a real text.
    truncates_prompt = False
    banned_ids: tuple[int, ...] = ()
    decoder_start_id = BOS  # a decoder-only model's: never asked for

    def __init__(self, tokenizer: Tokenizer, context: int) -> None:
        self.tokenizer = tokenizer
        self.vocab = TokenVocab(tokenizer)
        self.context = context

    @property
    def eos_id(self) -> int | None:
        """The id that ends a continuation (None: the continuation runs to its length)."""
        return self.tokenizer.eos_id

    def validate_input(self, text: str) -> str | None:
        """One line when ``text`` does not leave the model room to continue it."""
        n = len(self.tokenizer.encode(text))
        if n >= self.context:
            return (
                f"the input is {n:,} tokens; this model's context is {self.context:,}: "
                f"shorten it to at most {self.context - 1:,} tokens"
            )
        return None

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        return list(EXAMPLE_PROMPTS[:n])

    def solve(self, input_text: str) -> str:
        """No reference continuation: a real text has no single right answer."""
        return ""
