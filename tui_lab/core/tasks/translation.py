"""Translation by a real encoder-decoder (Marian's opus-mt): the task of a translator opened from files.

What decoding asks of a task for such a model, beyond ``TokenizedText``'s
vocabulary: the source text is encoded by the source tokenizer (``</s>``
appended), the decoder starts from the model's own ``decoder_start_id``
(opus-mt's is the pad id, not the lab's BOS), stops at its ``eos_id``, and
never emits ``banned_ids`` (the pad id and ``bad_words_ids``: a translator's
pad row is never a real output).
"""

from __future__ import annotations

from tui_lab.core.tasks.tokenized import Tokenizer, TokenVocab

# Sentences the Decode pane offers for a translator: short, plain English
# (opus-mt's source side is English for the en-* models).
EXAMPLE_SOURCES = (
    "The cat sat on the mat.",
    "I would like a cup of tea, please.",
    "Where is the train station?",
    "The weather is nice today.",
    "She reads a book in the garden.",
)


class Translation:
    """Translate a typed source text: the decoder writes the target, token by token."""

    name = "translation"
    is_lm = False
    # A source longer than the context is refused in one line, not cut.
    truncates_prompt = False

    def __init__(
        self,
        tokenizer: Tokenizer,
        context: int,
        decoder_start_id: int,
        banned_ids: tuple[int, ...] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab = TokenVocab(tokenizer)
        self.context = context
        self.decoder_start_id = decoder_start_id
        self.banned_ids = banned_ids

    @property
    def eos_id(self) -> int | None:
        """The id that ends a translation."""
        return self.tokenizer.eos_id

    def validate_input(self, text: str) -> str | None:
        """One line when ``text``'s source tokens do not fit the model's positions."""
        n = len(self.tokenizer.encode(text))
        if n > self.context:
            return (
                f"the input is {n:,} tokens; this translator's context is {self.context:,}: "
                f"shorten it to at most {self.context:,} tokens"
            )
        return None

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        return list(EXAMPLE_SOURCES[:n])

    def solve(self, input_text: str) -> str:
        """No reference translation: a text has no single right one."""
        return ""
