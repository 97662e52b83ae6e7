"""The Build pane's form over the key hyperparameters, with an inline error per field.

The whole form is one widget that draws its own rows. Built from Textual's
Input, Select and Checkbox it was about 100 widgets, and Textual pays for every
visible widget on each full repaint: showing the Build pane while a model
trained took twice as long as any other pane.

Keys: ↑↓ (or tab) move between fields. On a number, typing edits it, and escape
leaves the field so that the pane keys and q work again; enter resumes editing. On a
choice, ←→ cycle and enter opens the list of choices; on a switch, space or
enter toggles it.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from typing_extensions import Unpack

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.ui import key_bindings
from tui_lab.ui.panes.builder.form_draw import Cursor, draw_line
from tui_lab.ui.panes.builder.form_fields import FIELDS, FormField, load_fields, read_fields
from tui_lab.ui.panes.builder.form_layout import LABEL_WIDTH, Line, lay_out
from tui_lab.ui.widgets.line_view import LineView
from tui_lab.ui.widgets.widget_options import WidgetOptions

__all__ = ["FIELDS", "ConfigForm"]

EDIT_KEYS = {"backspace", "delete", "left", "right", "home", "end"}
EDIT_KEYS |= {"ctrl+a", "ctrl+e", "ctrl+u", "ctrl+k"}


class ConfigForm(LineView, can_focus=True):
    """Edits a LabConfig's key settings; reports edits, shows errors it is given."""

    COMPONENT_PREFIX = "config-form--"
    COMPONENT_CLASSES = {
        "config-form--section",
        "config-form--label",
        "config-form--label-invalid",
        "config-form--label-cursor",
        "config-form--value",
        "config-form--value-invalid",
        "config-form--value-cursor",
        "config-form--caret",
        "config-form--error",
        "config-form--option",
        "config-form--option-highlighted",
    }

    BINDINGS = key_bindings.FORM

    @dataclass
    class Edited(Message):
        """A field changed: the parsed values and the fields that did not parse."""

        form: ConfigForm
        values: dict[str, object]
        parse_errors: dict[str, str]

    @dataclass
    class FieldFocused(Message):
        """The cursor is on a field; ``help`` names its setting."""

        form: ConfigForm
        help: str

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self._fields = [FormField(spec) for spec in FIELDS.values()]
        self._index = {f.spec.key: i for i, f in enumerate(self._fields)}
        self.cursor = 0
        self.editing = False  # typing goes into the number under the cursor
        self.choosing: int | None = None  # the highlighted choice while the list is open
        self._errors: dict[str, str] = {}
        self._banner = ""
        self._lines: list[Line] = []
        self._field_line: dict[int, int] = {}
        self._loaded = False
        self._last_report: tuple[dict[str, object], dict[str, str]] | None = None
        self._report_pending = False

    # ---- the public face ------------------------------------------------------------

    @property
    def has_errors(self) -> bool:
        """True while any field (or the banner) shows an error."""
        return bool(self._errors or self._banner)

    @property
    def reporting(self) -> bool:
        """True while an edit waits to be reported to the pane (just after the next refresh)."""
        return self._report_pending

    @property
    def cursor_key(self) -> str:
        """The setting under the cursor."""
        return self._fields[self.cursor].spec.key

    @property
    def in_text(self) -> bool:
        """True while typed characters go into a number (not to the lab's keys)."""
        return self.has_focus and self.editing and self._fields[self.cursor].typed

    def focus_first(self) -> None:
        """Focus the form, editing its first field."""
        self.move_to(next(iter(FIELDS)))
        self.focus()

    def move_to(self, key: str) -> None:
        """Put the cursor on ``key``'s field."""
        self._set_cursor(self._index[key])

    def text(self, key: str) -> str:
        """What ``key``'s field shows."""
        return self._fields[self._index[key]].text

    def error(self, key: str) -> str:
        """The error shown under ``key``'s field ('' if none)."""
        return self._errors.get(key, "")

    @property
    def banner(self) -> str:
        """The error about no single field ('' if none)."""
        return self._banner

    def shown_lines(self) -> list[tuple[str, str | None, str]]:
        """Every line as drawn, scrolled into view or not: (kind, setting key, plain text)."""
        self.ensure_laid_out()
        return [
            (line.kind, self._fields[line.field].spec.key if line.field >= 0 else None, text)
            for line, text in zip(
                self._lines, (self.draw(i).text for i in range(len(self._lines))), strict=True
            )
        ]

    def load(self, config: LabConfig) -> None:
        """Show ``config``'s values (without reporting them as edits) and clear errors."""
        load_fields(self._fields, config)
        self.choosing = None
        self._loaded = True
        self._errors, self._banner = {}, ""
        self._changed()  # drawn lines are kept: they show the old values
        self._last_report = self.read()

    def read(self) -> tuple[dict[str, object], dict[str, str]]:
        """(values that parsed, {key: why} for those that did not)."""
        return read_fields(self._fields)

    def show_errors(self, errors: dict[str, str], banner: str = "") -> None:
        """Mark the fields in ``errors`` and explain each below it; ``banner`` for the rest."""
        if errors != self._errors or banner != self._banner:
            self._errors = {k: v for k, v in errors.items() if k in self._index}
            self._banner = banner
            self._changed()

    # ---- state changes --------------------------------------------------------------

    def _changed(self, report: bool = False) -> None:
        """Redraw; with ``report``, tell the pane once this batch of edits is done."""
        self.relayout()
        if report:
            self._schedule_report()

    def _set_cursor(self, index: int) -> None:
        index = max(0, min(len(self._fields) - 1, index))
        if index != self.cursor or self.choosing is not None:
            # A plain move changes two fields' lines, not the layout (an open choice list
            # closing does): redraw those lines alone, a keypress's cost on a long form.
            moved_only = self.choosing is None
            old, self.cursor = self.cursor, index
            self.choosing = None
            self._fields[index].edit.caret = len(self._fields[index].edit.text)
            if moved_only:
                self.redraw_lines({i for i, line in enumerate(self._lines) if line.field in (old, index)})
            else:
                self._changed()
            self.refresh_bindings()  # whether the pane keys and q type or switch depends on the field
        self._announce()
        self.call_after_refresh(self._scroll_to_cursor)

    def _set_editing(self, editing: bool) -> None:
        if editing != self.editing:
            self.editing = editing
            self._changed()
            self.refresh_bindings()

    def _announce(self) -> None:
        if self.has_focus:
            spec = self._fields[self.cursor].spec
            self.post_message(
                self.FieldFocused(self, spec.key + (f" · {spec.hint}" if spec.hint else ""))
            )

    def _scroll_to_cursor(self) -> None:
        self.ensure_laid_out()
        y = self._field_line.get(self.cursor)
        if y is None:
            return
        below = 1
        while y + below < len(self._lines) and self._lines[y + below].field == self.cursor:
            below += 1  # its error and open choice list come into view with it
        top = y - 2 if self.cursor == 0 or self._lines[y - 1].kind == "section" else y
        top = max(0, top)
        self.scroll_to_region(Region(0, top, 1, y + below - top), animate=False, force=True)

    def _schedule_report(self) -> None:
        """Report once after this batch of edits (values read when it runs)."""
        if self._loaded and not self._report_pending:
            self._report_pending = True
            self.call_after_refresh(self._report)

    def _report(self) -> None:
        self._report_pending = False
        current = self.read()
        if current == self._last_report:
            return  # a no-op edit
        self._last_report = current
        values, errors = current
        self.post_message(self.Edited(self, values, errors))

    # ---- keys and mouse -------------------------------------------------------------

    def check_consume_key(self, key: str, character: str | None) -> bool:
        """While a number is edited, printable keys type (so the pane keys and q are not bindings)."""
        return self.in_text and character is not None and character.isprintable()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Escape only means something while editing or choosing; else the lab's escape runs."""
        if action == "leave":
            return self.editing or self.choosing is not None
        return True

    def on_key(self, event: events.Key) -> None:
        """Typing and the editing keys go into the number under the cursor."""
        if not self.in_text or self.choosing is not None:
            return
        edit = self._fields[self.cursor].edit
        if event.is_printable and event.character and "+" not in event.key:  # not alt+…
            edit.insert(event.character)
            changed = True
        elif event.key in EDIT_KEYS:
            before = edit.text
            edit.key(event.key)
            changed = edit.text != before
        else:
            return
        event.stop()
        event.prevent_default()
        self._changed(report=changed)

    def on_paste(self, event: events.Paste) -> None:
        """A paste goes into the number under the cursor."""
        if self.in_text:
            event.stop()
            self._fields[self.cursor].edit.insert(event.text.strip())
            self._changed(report=True)

    def on_focus(self, event: events.Focus) -> None:
        """Arriving in the form edits the field under the cursor (as focusing an input)."""
        self._set_editing(True)
        self._changed()
        self._announce()

    def on_blur(self, event: events.Blur) -> None:
        """The cursor is only drawn while the form has focus; an open list closes."""
        self.choosing = None
        self._changed()

    def on_click(self, event: events.Click) -> None:
        """Click a field to edit it, a choice or switch to change it, an open choice to pick it."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        self.ensure_laid_out()
        y = offset.y + self.scroll_offset.y
        if not 0 <= y < len(self._lines):
            return
        line = self._lines[y]
        if line.kind == "option":
            self._pick(line.option)
        elif line.kind in ("field", "error"):
            was_here = line.field == self.cursor and self.has_focus
            self._set_cursor(line.field)
            self._set_editing(True)
            kind = self._fields[line.field].spec.kind
            on_value = line.kind == "field" and offset.x >= LABEL_WIDTH
            if on_value and (kind == "bool" or (kind == "choice" and was_here)):
                self.action_activate()

    def action_move(self, step: int) -> None:
        """↑↓: the previous/next field, or the previous/next choice in an open list."""
        if self.choosing is not None:
            choices = self._fields[self.cursor].spec.choices
            self.choosing = max(0, min(len(choices) - 1, self.choosing + step))
            self._changed()
            return
        self._set_cursor(self.cursor + step)

    def action_tab(self, step: int) -> None:
        """Tab moves field by field, then on to the next control past either end."""
        target = self.cursor + step
        if 0 <= target < len(self._fields):
            self._set_cursor(target)
        elif step > 0:
            self.screen.focus_next()
        else:
            self.screen.focus_previous()

    def action_activate(self) -> None:
        """Enter: resume editing; on a number go to the next field; open, pick or toggle."""
        f = self._fields[self.cursor]
        if self.choosing is not None:
            self._pick(self.choosing)
        elif not self.editing:
            self._set_editing(True)
        elif f.spec.kind == "choice":
            self.choosing = f.spec.choices.index(f.value) if f.value in f.spec.choices else 0
            self._changed()
            self.call_after_refresh(self._scroll_to_cursor)
        elif f.spec.kind == "bool":
            self.action_toggle_field()
        else:
            self._set_cursor(self.cursor + 1)

    def action_toggle_field(self) -> None:
        """Space: toggle a switch, open (or pick from) a choice list."""
        f = self._fields[self.cursor]
        if f.spec.kind == "bool":
            f.value = not f.value
            self._set_editing(True)
            self._changed(report=True)
        elif f.spec.kind == "choice":
            self._set_editing(True)
            self.action_activate()

    def action_cycle(self, step: int) -> None:
        """←→ on a choice: the previous/next choice at once; on a switch: toggle."""
        f = self._fields[self.cursor]
        if f.spec.kind == "bool":
            self.action_toggle_field()
        elif f.spec.kind == "choice" and self.choosing is None:
            choices = f.spec.choices
            at = choices.index(f.value) if f.value in choices else -step
            f.value = choices[(at + step) % len(choices)]
            self._changed(report=True)

    def action_leave(self) -> None:
        """Escape: close an open choice list, else stop editing (the pane keys switch panes again)."""
        if self.choosing is not None:
            self.choosing = None
            self._changed()
        else:
            self._set_editing(False)

    def _pick(self, option: int) -> None:
        f = self._fields[self.cursor]
        f.value = f.spec.choices[option]
        self.choosing = None
        self._changed(report=True)

    # ---- drawing --------------------------------------------------------------------

    def lay_out(self, width: int) -> int:
        """The form's lines at ``width``: sections, fields, errors, an open choice list."""
        open_field = self.cursor if self.choosing is not None and self.has_focus else None
        self._lines, self._field_line = lay_out(
            self._fields, self._errors, self._banner, open_field, width
        )
        return len(self._lines)

    def draw(self, index: int) -> Strip:
        """One line of the form."""
        if not 0 <= index < len(self._lines):
            return Strip([])
        focused = self.has_focus
        cursor = Cursor(self.cursor if focused else -1, self.editing, self.choosing)
        return draw_line(self._lines[index], self._fields, self._errors, cursor, self.style_of)
