"""Text for char-lm: the embedded default (Python's help text) or a user's file, cleaned.

Cleaning maps every character into ``TEXT_VOCAB`` so the model never sees UNK
in training.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from tui_lab.core.config.error import field_error
from tui_lab.core.tasks.vocab import TEXT_VOCAB

# A user text file larger than this is refused (the whole text is held in memory).
MAX_TEXT_BYTES = 64 * 2**20

# Typographic characters common in English text, spelt in ASCII.
_ASCII_SPELLING = {
    "‘": "'",
    "’": "'",
    "‚": "'",
    "“": '"',
    "”": '"',
    "„": '"',
    "–": "-",
    "—": "-",
    "−": "-",
    "…": "...",
    "ß": "ss",
    "\u00a0": " ",
    "\x0b": " ",
    "\x0c": " ",
}
_OUTSIDE_TEXT_VOCAB = re.compile("[^" + re.escape(TEXT_VOCAB.chars) + "]")


@lru_cache(maxsize=4096)
def _ascii_for(char: str) -> str:
    """Closest text in the vocabulary for one character: ASCII spelling, accents dropped, or a space."""
    if char in _ASCII_SPELLING:
        return _ASCII_SPELLING[char]
    if unicodedata.combining(char):
        return ""
    base = unicodedata.normalize("NFKD", char)
    base = "".join(c for c in base if c in TEXT_VOCAB)
    return base or " "


def to_text_vocab(text: str) -> str:
    """``text`` with line ends normalised and every character inside ``TEXT_VOCAB``.

    Characters outside it are spelt in ASCII where that is obvious (curly quotes,
    dashes, accented letters) and otherwise become a space, so the model never
    sees UNK in training.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _OUTSIDE_TEXT_VOCAB.sub(lambda m: _ascii_for(m.group()), text)


@lru_cache(maxsize=1)
def default_text() -> str:
    """Python's own help text (``pydoc_data.topics``): in every install, nothing to download."""
    from pydoc_data.topics import topics

    return to_text_vocab("\n".join(topics[key] for key in sorted(topics)))


def read_text_file(path: str) -> str:
    """A user's text file for char-lm, cleaned; errors are one-line ConfigErrors."""
    return to_text_vocab(read_raw_text(path))


def read_raw_text(path: str) -> str:
    """A user's text file as written (UTF-8, line ends normalised), for a real model's
    tokenizer, which has a piece for every character; errors are one-line ConfigErrors."""
    p = Path(path).expanduser()
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise field_error("task.text", f"{p} is a folder, not a text file")
        if size > MAX_TEXT_BYTES:
            raise field_error(
                "task.text",
                f"{p} is {size / 2**20:.0f} MiB; the lab reads at most "
                f"{MAX_TEXT_BYTES // 2**20} MiB"
            )
        raw = p.read_bytes()
    except FileNotFoundError:
        raise field_error("task.text", f"{p}: no such file") from None
    except OSError as exc:
        raise field_error("task.text", f"{p}: cannot read ({exc.strerror})") from None
    if b"\x00" in raw:
        raise field_error("task.text", f"{p}: not a text file")
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
