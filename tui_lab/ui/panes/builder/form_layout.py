"""Which lines the Build form shows, and at what width: no drawing, no Textual.

A line is a section title, a field's row, a wrapped error under it, an option
of the choice list that is open, or the banner for errors about no one field.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from tui_lab.ui.panes.builder.form_fields import SECTIONS, FormField

LABEL_WIDTH = 17
VALUE_WIDTH = 18


@dataclass(frozen=True)
class Line:
    """One drawn line: what it shows and which field (if any) it belongs to."""

    kind: str  # blank | banner | section | field | error | option
    text: str = ""
    field: int = -1  # index into the field list
    option: int = -1  # index into the field's choices, for an open choice list


def lay_out(
    fields: list[FormField],
    errors: dict[str, str],
    banner: str,
    open_field: int | None,
    width: int,
) -> tuple[list[Line], dict[int, int]]:
    """The form's lines at ``width``, and each field's row; ``open_field`` lists its choices."""
    index = {f.spec.key: i for i, f in enumerate(fields)}
    lines: list[Line] = []
    if banner:
        lines += [Line("banner", t) for t in wrap("⚠ " + banner, width)]
    field_line: dict[int, int] = {}
    for title, specs in SECTIONS:
        if lines:
            lines.append(Line("blank"))
        lines.append(Line("section", title))
        for spec in specs:
            i = index[spec.key]
            field_line[i] = len(lines)
            lines.append(Line("field", field=i))
            if i == open_field:
                lines += [
                    Line("option", choice, field=i, option=n)
                    for n, choice in enumerate(spec.choices)
                ]
            message = errors.get(spec.key)
            if message:
                lines += [
                    Line("error", t, field=i) for t in wrap("↳ " + message, width - LABEL_WIDTH)
                ]
    return lines, field_line


def fit(text: str, width: int = VALUE_WIDTH) -> str:
    """``text`` in a box of ``width`` cells: padded, or cut with an ellipsis."""
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` (at least 10) cells."""
    return textwrap.wrap(text, max(10, width), break_long_words=True) or [""]
