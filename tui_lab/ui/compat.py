"""Guards for Textual bugs the lab would otherwise inherit.

Installed once, when the app module is imported; each guard names the
Textual behaviour it covers and has a test (``tests/ui/test_compat.py``) that
fails once Textual no longer has the bug, which is when the guard goes.

``OptionList._move_page`` (private API, replaced for every option list: the
command palette's is Textual's own, so a subclass could not reach it). Textual
8.2's page up/down looks the highlight up in ``_index_to_line``, which is empty
until the list has laid out its lines, and raises ``KeyError``. No Textual issue
for it was found (searched); the same crash, from Textual's ``Select`` overlay,
is reported downstream in kagan-sh/kagan-legacy#31 ("KeyError crash in
action_page OptionsList").
"""

from __future__ import annotations

from typing import Literal

from textual.widgets import OptionList

_move_page = OptionList._move_page


def _move_page_when_laid_out(self: OptionList, direction: Literal[-1, 1]) -> None:
    # Textual 8.2: page up/down before an OptionList has laid out its lines
    # (no height yet, or keys typed ahead of the first layout, as in the
    # command palette) looks the highlight up in an empty line map and raises
    # KeyError, which kills the app. With nothing laid out there is no page.
    if self.highlighted is not None and self.highlighted not in self._index_to_line:
        return
    _move_page(self, direction)


def install() -> None:
    """Apply every guard (idempotent)."""
    OptionList._move_page = _move_page_when_laid_out  # type: ignore[method-assign]
