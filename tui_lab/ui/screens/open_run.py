"""Open-run dialog: pick a run folder (newest first) or type its path."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from tui_lab.core.runs.sae_summary import is_sae_folder
from tui_lab.core.runs.summary import list_run_folders
from tui_lab.core.runs.transcoder_summary import is_transcoder_folder
from tui_lab.ui import key_bindings


class OpenRunScreen(ModalScreen[Path | None]):
    """Lists the run folders under the runs root; Enter opens one."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS = key_bindings.OPEN_RUN

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        # an SAE's folder opens in Features, not here
        found = list_run_folders(root, depth=1) if root.is_dir() else []
        self.runs = newest_first([p for p in found if not is_sae_folder(p) and not is_transcoder_folder(p)])

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Open a run folder", classes="dialog-title")
            yield Static(
                f"runs in {self.root}/" if self.runs else f"no runs in {self.root}/ yet",
                classes="dim",
            )
            options = [Option(Text(p.name), id=str(i)) for i, p in enumerate(self.runs)]
            yield OptionList(*options, id="run-list")
            yield Label("or a path")
            yield Input(placeholder="runs/copy-20250101-120000", id="run-path")
            yield Static("", id="open-error", classes="field-error")
            yield Static("enter open · tab switch · escape cancel", classes="dim")

    def on_mount(self) -> None:
        """Focus the list when there is one, else the path field."""
        (self.query_one("#run-list") if self.runs else self.query_one("#run-path")).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a listed run opens it."""
        event.stop()
        self.dismiss(self.runs[event.option_index])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter on a typed path opens it if it is a folder."""
        event.stop()
        path = Path(event.value.strip()).expanduser()
        if not event.value.strip() or not path.is_dir():
            self.query_one("#open-error", Static).update(f"↳ {path}: no such folder")
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        """Close without opening anything."""
        self.dismiss(None)


def newest_first(folders: list[Path]) -> list[Path]:
    """The run folders, the one written last first (a folder gone meanwhile goes last)."""

    def written(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(folders, key=written, reverse=True)
