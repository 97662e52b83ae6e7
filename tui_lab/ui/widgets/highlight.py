"""Source text (a preset's YAML, a model's config.json) coloured once, for a Static."""

from __future__ import annotations

from rich.text import Text


def highlighted(code: str, lexer: str) -> Text:
    """``code`` coloured by ``lexer`` ("yaml", "json") in the lab's theme.

    A ``rich.syntax.Syntax`` handed to a Static lexes its code again at every render
    (each layout, each frame the pane is redrawn): a quarter of the lab's start-up
    time went there. The Text it makes is computed once here and wraps as any text.
    """
    from rich.syntax import Syntax

    # No background of its own: the pane's shows through, across whole lines.
    text = Syntax(code, lexer, theme="ansi_dark").highlight(code)
    text.rstrip()
    return text
