"""The Textual guards of ``ui/compat.py``: each works, and each test of Textual's own behaviour
fails once Textual has fixed the bug (then the guard goes)."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from tui_lab.ui import compat


def _highlighted_before_layout() -> OptionList:
    """A list with a highlight and no lines laid out yet (typed-ahead keys, a list not shown)."""
    options = OptionList(*(str(i) for i in range(50)))
    options.highlighted = 3
    assert not options._index_to_line
    return options


def test_textual_still_raises_on_page_down_before_layout() -> None:
    """When this fails, Textual pages a list that is not laid out: delete compat's guard."""
    with pytest.raises(KeyError):
        compat._move_page(_highlighted_before_layout(), 1)


def test_the_guard_pages_nothing_before_layout() -> None:
    compat.install()
    options = _highlighted_before_layout()
    options._move_page(1)
    options._move_page(-1)
    assert options.highlighted == 3
