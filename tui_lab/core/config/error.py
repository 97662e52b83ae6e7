"""``ConfigError``, and how its messages quote what a preset held.

A message reads ``<file>: <field>: <reason>`` on one line; the field and the
reason also travel as attributes, so the Build pane can put the reason next to
the form field without parsing the text back.
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable

from tui_lab.core.errors import LabError


class ConfigError(LabError):
    """A preset or override the lab refuses; ``str()`` is one line for the user.

    ``field`` is the dotted setting the error is about (``"model.d_model"``), or
    a section or top-level key (``"model"``, ``"description"``) when no single
    setting is to blame, or None when the error is about the file or the whole
    config. ``reason`` is the text after the field (``"66 is not divisible by
    n_heads=4"``), or, when ``field`` is None, the explanation without the file
    name; None only for errors raised without one.
    """

    def __init__(self, message: str, field: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        # Errors cross process boundaries (the trainer child): keep the data, not only the text.
        return (type(self), self.args, {"field": self.field, "reason": self.reason})


def field_error(field: str, reason: str) -> ConfigError:
    """The error for one setting: ``"<field>: <reason>"``, with both kept as data."""
    return ConfigError(f"{field}: {reason}", field=field, reason=reason)


def with_source(exc: ConfigError, source: str) -> ConfigError:
    """``exc`` with the file (or ``<form>``) it came from in front of its message."""
    return ConfigError(f"{source}: {exc}", field=exc.field, reason=exc.reason)


# A preset may hold anything (a megabyte string, a YAML alias bomb that expands to
# millions of items): messages show values and names cut to a readable size, with
# control characters escaped so an error line can never drive the terminal.
_SHOW = reprlib.Repr()
_SHOW.maxlevel = 2
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlist = _SHOW.maxtuple = _SHOW.maxdict = _SHOW.maxset = 6
_SHOW.maxlong = 40


def show(value: object) -> str:
    """``repr(value)``, shortened: what an error message says a file held."""
    return _SHOW.repr(value)


def show_key(key: object) -> str:
    """A key as typed when it is a short printable word, else its shortened repr."""
    text = str(key)
    if isinstance(key, str) and len(text) <= 60 and text.isprintable():
        return text
    return show(key)


def suggest(word: object, options: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest option, or ``""``."""
    close = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
