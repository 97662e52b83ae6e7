"""The help screen: every key binding of the lab, by where it applies."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui_lab.ui.keymap import bindings_of, pane_keys

FIELD_KEYS = [
    ("escape", "leave the text field (then 1-6, q and ? work again)"),
    ("enter", "submit (decode the input, save, open)"),
    ("tab / shift+tab", "next / previous control"),
]

FORM_TYPING = [
    ("0-9 . e -", "type into a number (backspace, delete, ←→, home, end, ctrl+u)"),
]


EVERYWHERE_EXTRA = [
    ("ctrl+p", "command palette: every action by name"),
    ("ctrl+q", "quit (also q outside text fields)"),
]
# Keys a pane handles without a binding of its own (a widget's message).
PANE_EXTRA = {
    "build": FORM_TYPING,  # goes with the form's section
    "decode": [("enter", "decode the input / the chosen example")],
    "runs": [("enter", "in the filter line: back to the table (the filter stays)")],
}


def binding_rows(bindings: list[Binding], app: App[Any]) -> list[tuple[str, str]]:
    """(keys, what they do) for a BINDINGS list; one key's several actions are joined."""
    rows: dict[str, list[str]] = {}
    for b in bindings:
        if not isinstance(b, Binding):
            b = Binding(*b)
        key = app.get_key_display(b)
        description = b.tooltip or b.description or b.action  # the footer's label is terser
        if description not in rows.setdefault(key, []):
            rows[key].append(description)
    return [(key, " / ".join(descriptions)) for key, descriptions in rows.items()]


def lab_sections(app: App[Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The help screen's sections: the app's keys, text fields, then each pane's (from BINDINGS)."""
    sections = [
        ("Everywhere", binding_rows(bindings_of(type(app)), app) + EVERYWHERE_EXTRA),
        ("In text fields", FIELD_KEYS),
    ]
    for keys in pane_keys():
        title = f"{keys.number} {keys.title}"
        rows = binding_rows(bindings_of(keys.owner), app)
        for section, widget in keys.widgets:
            widget_rows = binding_rows(bindings_of(widget), app)
            if section:
                sections.append((title, rows))
                title, rows = f"{title}: {section}", widget_rows
            else:
                rows += widget_rows
        sections.append((title, rows + PANE_EXTRA.get(keys.pane, [])))
    from tui_lab.ui.screens.basics.basics_screen import BasicsScreen

    sections.append(("b Basics (over any pane)", binding_rows(bindings_of(BasicsScreen), app)))
    return sections


class HelpScreen(ModalScreen[None]):
    """Lists the bindings of the app, each pane and text fields; any of ?/escape/q closes it."""

    CSS_PATH = "help.tcss"
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close"),
    ]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(self._render_sections(), id="help-text")

    def on_mount(self) -> None:
        """Focus the body so the arrows and page keys scroll it."""
        self.query_one("#help-body").focus()

    @staticmethod
    def _section(title: str, rows: list[tuple[str, str]]) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold yellow", no_wrap=True, min_width=12)
        table.add_column()
        table.add_row(Text(title, style="bold cyan"), "")
        for key, what in rows:
            table.add_row(key, what)
        return table

    def _render_sections(self) -> Table:
        """Two columns of sections (the frame and Build/Train left, the other panes right)."""
        outer = Table.grid(padding=(0, 4))
        outer.add_column(ratio=1)
        outer.add_column(ratio=1)
        outer.add_row(Text("tfx-lab keys", style="bold underline"), "")
        outer.add_row(
            Text("Every action is also in the command palette (ctrl+p).", style="dim"), ""
        )
        half = (len(self.sections) + 1) // 2
        left, right = self.sections[:half], self.sections[half:]
        for i in range(half):
            cells = [
                self._section(*left[i]) if i < len(left) else "",
                self._section(*right[i]) if i < len(right) else "",
            ]
            outer.add_row("", "")
            outer.add_row(*cells)
        outer.add_row("", "")
        outer.add_row(Text("escape, ? or q closes this screen", style="dim"), "")
        return outer

    def action_close(self) -> None:
        """Close the help screen."""
        self.dismiss(None)
