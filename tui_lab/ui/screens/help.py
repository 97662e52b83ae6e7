"""The help screen: every key binding of the lab, by where it applies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui_lab.ui import key_bindings, pane_registry
from tui_lab.ui.user_keymap import UserKeymap, shown

FIELD_KEYS = [
    ("escape", f"leave the text field (then {pane_registry.pane_keys_text()}, q and ? work again)"),
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


Rows = list[tuple[str, str]]


@dataclass(frozen=True)
class PaneKeys:
    """What help lists for one mounted pane: its key and title, and its key sections."""

    key: str
    title: str
    sections: list[tuple[str, list[BindingType]]]  # ("" for the pane's own, "the form", ...)
    extra: Rows = field(default_factory=list)  # keys handled without a binding


def binding_rows(
    bindings: list[BindingType], display: Callable[[Binding], str], keymap: Mapping[str, str]
) -> Rows:
    """(keys, what they do + id) for bindings as remapped; one key's several actions joined."""
    rows: dict[str, list[str]] = {}
    for b in shown(bindings, keymap):
        key = display(b)
        description = b.tooltip or b.description or b.action  # the footer's label is terser
        what = escape(description) + (f"  [dim]{b.id}[/]" if b.id else "")
        if not any(w.startswith(escape(description)) for w in rows.setdefault(key, [])):
            rows[key].append(what)
    return [(key, " / ".join(descriptions)) for key, descriptions in rows.items()]


def lab_sections(
    app_bindings: list[BindingType],
    panes: list[PaneKeys],
    display: Callable[[Binding], str],
    keymap: Mapping[str, str],
) -> list[tuple[str, Rows]]:
    """The help screen's sections: the app's keys, text fields, each mounted pane's, basics."""
    sections = [
        ("Everywhere", binding_rows(app_bindings, display, keymap) + EVERYWHERE_EXTRA),
        ("In text fields", FIELD_KEYS),
    ]
    for pane in panes:
        title = f"{pane.key} {pane.title}"
        rows: Rows = []
        for section, bindings in pane.sections:
            section_rows = binding_rows(bindings, display, keymap)
            if section:
                sections.append((title, rows))
                title, rows = f"{pane.key} {pane.title}: {section}", section_rows
            else:
                rows += section_rows
        sections.append((title, rows + pane.extra))
    sections.append(("b Basics (over any pane)", binding_rows(key_bindings.BASICS, display, keymap)))
    return sections


class HelpScreen(ModalScreen[None]):
    """Lists the bindings of the app, each pane and text fields; any of ?/escape/q closes it."""

    CSS_PATH = "help.tcss"
    BINDINGS = key_bindings.HELP

    def __init__(self, sections: list[tuple[str, Rows]], keymap: UserKeymap) -> None:
        super().__init__()
        self.sections = sections
        self.keymap = keymap

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
        outer.add_row(Text.from_markup(self._keymap_note(), style="dim"), "")
        return outer

    def _keymap_note(self) -> str:
        """Where a user remaps keys (ids are the dim names above), and what was refused."""
        path = self.keymap.path
        there = "in use" if path.exists() else "no file yet"
        note = f"Remap keys in {path} ({there}): 'id: key' lines, e.g. train.toggle: t"
        return "\n".join([escape(note), *(escape(p) for p in self.keymap.problems)])

    def action_close(self) -> None:
        """Close the help screen."""
        self.dismiss(None)
