"""Save-as dialog: name the edited settings and write them as a preset YAML."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.presets import user_preset_dir
from tui_lab.ui import key_bindings

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SavePresetScreen(ModalScreen[Path | None]):
    """Asks for a preset name (and a description), then writes the YAML file."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS = key_bindings.SAVE_PRESET

    def __init__(self, config: LabConfig, user_dir: Path | None = None) -> None:
        super().__init__()
        self.config = config
        self.folder = user_dir or user_preset_dir()

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Save preset as", classes="dialog-title")
            yield Static(f"into {self.folder}", classes="dim")
            yield Label("name")
            yield Input(placeholder="my-copy", id="name", value=self._suggest_name())
            yield Label("description")
            yield Input(
                value=self.config.description.splitlines()[0] if self.config.description else "",
                id="description",
            )
            yield Static("", id="save-error", classes="field-error")
            yield Static("enter save · escape cancel", classes="dim")

    def _suggest_name(self) -> str:
        base = self.config.name if _NAME.match(self.config.name) else "preset"
        name, n = f"{base}-edit", 2
        while (self.folder / f"{name}.yaml").exists():
            name, n = f"{base}-edit{n}", n + 1
        return name

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in either field saves."""
        event.stop()
        self.save()

    def save(self) -> None:
        """Validate the name, write the file atomically and close with its path."""
        name = self.query_one("#name", Input).value.strip()
        error = self.query_one("#save-error", Static)
        if name.endswith((".yaml", ".yml")):
            name = name.rsplit(".", 1)[0]
        if not _NAME.match(name):
            error.update("↳ use letters, digits, '-', '_' or '.' (up to 64)")
            return
        path = self.folder / f"{name}.yaml"
        if path.exists():
            error.update(f"↳ {path.name} already exists; choose another name")
            return
        description = self.query_one("#description", Input).value.strip()
        config = dataclasses.replace(self.config, description=description)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".yaml.tmp")
            tmp.write_text(config.to_yaml(), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            error.update(f"↳ cannot write {path}: {exc.strerror}")
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        """Close without saving."""
        self.dismiss(None)
