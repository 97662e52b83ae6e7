"""Character vocabularies: specials first, then one id per character.

Source and target share one vocabulary (the tutorials' shared embedding), so
an id means the same thing on both sides of an encoder-decoder model and the
heatmap axes can be labelled from one table.
"""

from __future__ import annotations

import string
from collections.abc import Iterable

from tui_lab.core.visible_text import VISIBLE_WHITESPACE

# Special ids come first so they are the same in every vocabulary: a model
# trained on digits and one trained on text agree on what 0..4 mean.
PAD, BOS, EOS, UNK, SEP = 0, 1, 2, 3, 4
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>", "<sep>")
N_SPECIALS = len(SPECIALS)

# Short labels for heatmap axes: one cell is only a few columns wide, and a
# space or newline would be invisible there.
SPECIAL_LABELS = ("⟨pad⟩", "⟨s⟩", "⟨/s⟩", "⟨unk⟩", "⟨sep⟩")
CHAR_LABELS = VISIBLE_WHITESPACE

# Ids travel through ``id_string`` as code points; UTF-32 cannot hold the
# surrogate range, so a vocabulary must stay below it.
MAX_VOCAB_SIZE = 0xD800


class _IdTable(dict[int, int]):
    """``str.translate`` table that sends every unknown character to UNK."""

    def __missing__(self, key: int) -> int:
        return UNK


class Vocab:
    """A fixed character vocabulary with lossless encode/decode for its characters.

    Ids ``0..4`` are the specials (``PAD BOS EOS UNK SEP``); character ``chars[i]``
    has id ``5 + i``. Characters outside ``chars`` encode to ``UNK``.
    """

    def __init__(self, chars: str) -> None:
        if len(set(chars)) != len(chars):
            dupes = sorted({c for c in chars if chars.count(c) > 1})
            raise ValueError(f"Vocab: repeated characters {dupes!r}")
        if N_SPECIALS + len(chars) > MAX_VOCAB_SIZE:
            raise ValueError(f"Vocab: at most {MAX_VOCAB_SIZE - N_SPECIALS} characters")
        self._chars = chars
        self._ids: dict[str, int] = {c: i for i, c in enumerate(chars, start=N_SPECIALS)}
        self._table = _IdTable({ord(c): i for c, i in self._ids.items()})
        self._labels = list(SPECIAL_LABELS) + [CHAR_LABELS.get(c, c) for c in chars]

    @property
    def chars(self) -> str:
        """The ordinary characters, in id order (specials excluded)."""
        return self._chars

    def __len__(self) -> int:
        return N_SPECIALS + len(self._chars)

    def __contains__(self, char: object) -> bool:
        return char in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and other._chars == self._chars

    def __hash__(self) -> int:
        return hash(self._chars)

    def __repr__(self) -> str:
        return f"Vocab({self._chars!r})"

    def encode(self, text: str) -> list[int]:
        """Ids for ``text``; characters outside the vocabulary become ``UNK``."""
        ids = self._ids
        return [ids.get(c, UNK) for c in text]

    def id_string(self, text: str) -> str:
        """``text`` with every character replaced by ``chr(id)``.

        Batching joins such strings and turns them into a tensor through one
        bytes buffer, instead of creating a Python int per token.
        """
        return text.translate(self._table)

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """Text for ``ids``; specials (and ids out of range) are dropped.

        With ``stop_at_eos`` everything from the first EOS on is ignored, which
        is what a decoded model output needs.
        """
        if hasattr(ids, "tolist"):  # a tensor: one conversion instead of one per element
            ids = ids.tolist()
        chars = self._chars
        out = []
        for i in ids:
            i = int(i)
            if i == EOS and stop_at_eos:
                break
            j = i - N_SPECIALS
            if 0 <= j < len(chars):
                out.append(chars[j])
        return "".join(out)

    def label(self, id: int) -> str:
        """A short printable label for heatmap axes (specials as ``⟨s⟩``, space as ``␣``)."""
        id = int(id)
        if 0 <= id < len(self._labels):
            return self._labels[id]
        return f"⟨{id}⟩"

    def unknown_chars(self, text: str) -> list[str]:
        """Characters of ``text`` outside the vocabulary, each once, in order of appearance."""
        return list(dict.fromkeys(c for c in text if c not in self._ids))


DIGITS_VOCAB = Vocab("0123456789+")
# string.printable minus carriage return, vertical tab and form feed: text is
# normalised to "\n" line ends before encoding, and the other two never
# carry meaning in plain text.
TEXT_VOCAB = Vocab("".join(c for c in string.printable if c not in "\r\x0b\x0c"))
