"""One visible-whitespace table: the lab's vocabulary labels and the Decode pane's text use it."""

from __future__ import annotations

from tui_lab.core.tasks.vocab import TEXT_VOCAB
from tui_lab.core.visible_text import VISIBLE_WHITESPACE
from tui_lab.ui.panes.decode.decode_view import visible


def test_vocabulary_labels_and_decode_text_show_whitespace_from_the_one_table() -> None:
    for ch in " \n\t":
        assert TEXT_VOCAB.label(TEXT_VOCAB.encode(ch)[0]) == VISIBLE_WHITESPACE[ch]
    assert visible("a\tb\nc\rd e") == "a⇥b↵c␍d e"  # a space stays a space in running text
