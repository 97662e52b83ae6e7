"""How the Build form draws one of its lines: labels, values with a caret, errors, a choice list.

Free of widgets: the form passes its state and a function giving the style of
a component (``"label-cursor"``, ``"value"``, ...) on top of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from tui_lab.ui.panes.builder.form_fields import FormField, format_value
from tui_lab.ui.panes.builder.form_layout import LABEL_WIDTH, VALUE_WIDTH, Line, fit

StyleOf = Callable[..., Style]  # style("error") -> the form's style with that component's


@dataclass(frozen=True)
class Cursor:
    """Where the form's cursor is and what it is doing (``field`` -1: the form has no focus)."""

    field: int = -1
    editing: bool = False
    choosing: int | None = None  # the highlighted choice while a list is open


def draw_line(
    line: Line, fields: list[FormField], errors: dict[str, str], cursor: Cursor, style: StyleOf
) -> Strip:
    """One line of the form as segments (uncropped: the form fits it to its width)."""
    indent = Segment(" " * LABEL_WIDTH, style())
    if line.kind == "banner":
        return Strip([Segment(line.text, style("error"))])
    if line.kind == "error":  # under the value it explains
        return Strip([indent, Segment(line.text, style("error"))])
    if line.kind == "section":
        return Strip([Segment(line.text, style("section"))])
    if line.kind == "option":
        highlighted = line.option == cursor.choosing
        text = ("▸ " if highlighted else "  ") + line.text
        return Strip(
            [indent, Segment(fit(text), style("option-highlighted" if highlighted else "option"))]
        )
    if line.kind != "field":
        return Strip([])
    return _draw_field(fields[line.field], line.field == cursor.field, errors, cursor, style)


def _draw_field(
    f: FormField, here: bool, errors: dict[str, str], cursor: Cursor, style: StyleOf
) -> Strip:
    invalid = f.spec.key in errors
    label = "label-invalid" if invalid else ("label-cursor" if here else "label")
    value = (
        ("value",) + (("value-invalid",) if invalid else ()) + (("value-cursor",) if here else ())
    )
    value_style = style(*value)
    segments = [Segment(fit(f.spec.label, LABEL_WIDTH), style(label))]
    if f.typed:
        text, caret = f.edit.text, f.edit.caret
        if here and cursor.editing:
            # Keep the caret inside the box: show the end of a long number.
            start = max(0, caret - (VALUE_WIDTH - 1))
            shown = text[start : start + VALUE_WIDTH]
            at = caret - start
            cell = shown[at] if at < len(shown) else " "
            segments += [
                Segment(shown[:at], value_style),
                Segment(cell, style(*value, "caret")),
                Segment(shown[at + 1 :].ljust(VALUE_WIDTH - at - 1), value_style),
            ]
        else:
            segments.append(Segment(fit(text), value_style))
    elif f.spec.kind == "bool":
        segments.append(Segment(fit("[x] on" if f.value else "[ ] off"), value_style))
    else:
        arrow = "▲" if here and cursor.choosing is not None else "▼"
        segments.append(
            Segment(fit(format_value(f.value), VALUE_WIDTH - 2) + " " + arrow, value_style)
        )
    return Strip(segments)
