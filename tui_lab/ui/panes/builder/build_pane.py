"""Build pane: pick a preset, see its YAML, edit key settings with inline validation.

With a real model opened from files (``--model``), the pane shows the model's
card and its ``config.json`` instead: its settings are the files', read-only;
under the card, the text to fine-tune it on and the number of steps, which
Train's space starts (``finetune_spec``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Label, Static
from typing_extensions import Unpack

from tui_lab.core.config.lab_config import ConfigError, LabConfig, check_fits_in_memory, load_file
from tui_lab.ui import key_bindings
from tui_lab.ui.messages import (
    ConfigChanged,
    ConfigInvalid,
    ShowCard,
    ShowConfig,
    ShowCounts,
    ShowForm,
)
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.builder.config_form import FIELDS, ConfigForm
from tui_lab.ui.state.host import Pane
from tui_lab.ui.widgets.highlight import highlighted
from tui_lab.ui.widgets.model_card import ModelCardView
from tui_lab.ui.widgets.model_summary import ModelSummary
from tui_lab.ui.widgets.preset_list import PresetList
from tui_lab.ui.widgets.text_line import TextLine
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from tui_lab.core.model.params import ParamReport
    from tui_lab.core.opening.model_card import ModelCard

FORM_HELP = "↑↓ move · type to edit · enter/←→ choose · esc leaves"
# Mirrors core/training/finetune.py's FINETUNE_TRAIN and FINETUNE_BLOCK (the core is
# imported only once torch has loaded, and this pane is drawn before that).
FINETUNE_STEPS = 1000
FINETUNE_HELP = ("above: the text file, then the steps · windows of 128 tokens (or the context), "
                 "8 a step, the last tenth validates · AdamW 3e-4, 20 warmup steps, cosine · "
                 "evaluated every 50 steps and at step 0 · on a CPU, for small models")


class BuildPane(Pane, Vertical):
    """Presets, the hyperparameter form, live size/cost and the YAML preview."""

    PANE_ID = pane_id(__name__)
    KEY_SECTIONS = (("the form", key_bindings.FORM),)
    HELP_EXTRA = (("0-9 . e -", "type into a number (backspace, delete, ←→, home, end, ctrl+u)"),)
    BINDINGS = key_bindings.BUILD

    def __init__(self, config: LabConfig, user_dir: Path | None = None, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.base = config
        self.config = config
        self.edited = False
        self.user_dir = user_dir

    def compose(self) -> ComposeResult:
        with Vertical(id="build-left"):
            yield Label("Presets", classes="pane-title")
            yield PresetList(self.user_dir, id="presets")
            yield ModelSummary(id="summary")
        with Vertical(id="build-form-col"):
            yield Label("Hyperparameters", classes="pane-title", id="form-title")
            yield Static("", id="preset-error", classes="field-error")
            yield ConfigForm(id="form")
            yield TextLine(FORM_HELP, id="form-help")
        with Vertical(id="build-yaml-col"):
            yield Label("YAML", classes="pane-title", id="yaml-title")
            with VerticalScroll(id="yaml-scroll"):
                yield Static(id="yaml")
        # An opened model's card and config.json (shown instead of the above: show_card).
        with VerticalScroll(id="build-card-col"):
            yield ModelCardView(id="model-card")
            yield Label("Fine-tune on a text (Train: space starts it)", classes="pane-title")
            yield Input(placeholder="text file, e.g. notes.txt", id="finetune-text")
            yield Input(value=str(FINETUNE_STEPS), placeholder="steps", type="integer", id="finetune-steps")
            yield Static(FINETUNE_HELP, id="finetune-help")
        with Vertical(id="build-config-col"):
            yield Label("config.json", classes="pane-title")
            with VerticalScroll(id="config-json-scroll"):
                yield Static(id="config-json")

    def on_mount(self) -> None:
        """Show the starting preset."""
        self.query_one(PresetList).reload(
            select=Path(self.base.source) if self.base.source.endswith(".yaml") else self.base.name
        )
        self.show_config(self.base, yaml_now=False)
        self.query_one(ModelSummary).show_loading()
        # Syntax highlighting imports pygments: after the first frame. Not at all while
        # a model's card takes the form's place (``show_form`` shows it if the model fails).
        self.call_after_refresh(lambda: None if self.card_shown else self._show_yaml(self.config))

    def focus_default(self) -> None:
        """Put the cursor where a visitor starts: the preset list (or the model's card)."""
        if self.card_shown:
            self.query_one("#build-card-col").focus()
        else:
            self.query_one(PresetList).focus()

    # ---- an opened model ------------------------------------------------------------

    card: ModelCard | None = None  # the opened model's ModelCard while it is on show

    def show_opening(self, source: str) -> None:
        """Until ``--model``'s model is open, its card's place says that it is being opened."""
        self.query_one(ModelCardView).show_opening(source)
        self.add_class("-model")
        self.refresh_bindings()

    def on_show_config(self, message: ShowConfig) -> None:
        """An opened run's config: the form shows it."""
        self.show_config(message.config)

    def on_show_form(self, message: ShowForm) -> None:
        """Back to the lab's own configs: the form again."""
        self.show_form()

    def on_show_card(self, message: ShowCard) -> None:
        """A model opened from files: its card."""
        self.show_card(message.card)

    def on_show_counts(self, message: ShowCounts) -> None:
        """New parameter counts: the summary."""
        self.show_report(message.report, message.vocab_size)

    def show_card(self, card: ModelCard) -> None:
        """Show an opened model's card and config.json instead of the presets and the form."""
        self.card = card
        self.host.state.finetune = self.finetune_spec()
        self.query_one(ModelCardView).show_card(card)
        try:
            text = (card.folder / "config.json").read_text(encoding="utf-8")
        except OSError as exc:
            text = f"// cannot read config.json: {exc.strerror or exc}"
        self.query_one("#config-json", Static).update(highlighted(text, "json"))
        focused_here = self.app.focused is not None and self in self.app.focused.ancestors
        self.add_class("-model")
        self.refresh_bindings()
        if focused_here:
            self.focus_default()

    def finetune_spec(self) -> dict[str, object] | None:
        """What Train fine-tunes the opened model with (``RemoteRun(finetune=...)``); None
        without a text file typed."""
        text = self.query_one("#finetune-text", Input).value.strip()
        if self.card is None or not text:
            return None
        steps = self.query_one("#finetune-steps", Input).value.strip()
        overrides = {"train.steps": int(steps)} if steps.isdigit() and int(steps) > 0 else {}
        return {"source": self.card.name, "revision": self.card.revision, "text": text,
                "overrides": overrides}

    def on_input_changed(self, event: Input.Changed) -> None:
        """The fine-tune fields changed: the lab's state holds what Train's space would use."""
        if event.input.id in ("finetune-text", "finetune-steps"):
            self.host.state.finetune = self.finetune_spec()

    @property
    def card_shown(self) -> bool:
        """Whether a model's card (or the note that it is being opened) is on show."""
        return self.has_class("-model")

    def show_form(self) -> None:
        """Back to the presets and the form (the model failed to open, or a run replaced it)."""
        self.card = None
        self.host.state.finetune = None
        self.remove_class("-model")
        self.refresh_bindings()
        self._show_yaml(self.config)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The form's keys (save as, revert, focus) do nothing while a model's card is on show."""
        if self.card_shown and action in ("save_as", "revert", "focus_presets", "focus_form"):
            return False
        return True

    # ---- loading and editing ----------------------------------------------------

    def show_config(self, config: LabConfig, yaml_now: bool = True) -> None:
        """Load ``config`` into the form as the new unedited base (a preset, or an opened run)."""
        self.base = self.config = config
        self.edited = False
        self.query_one(ConfigForm).load(config)
        self._update_titles()
        if yaml_now:
            self._show_yaml(config)

    def _update_titles(self) -> None:
        mark = " (edited)" if self.edited else ""
        self.query_one("#form-title", Label).update(f"Hyperparameters · {self.base.name}{mark}")

    def _show_yaml(self, config: LabConfig, stale: str = "") -> None:
        # Block style for reading; the file save-as writes comes from LabConfig.to_yaml().
        diff = config.diff_dict()
        text = "# what a saved preset holds\n" + (
            yaml.safe_dump(diff, sort_keys=False) if diff else "{}\n"
        )
        if stale:
            text = f"# {stale}\n# showing the last valid settings\n" + text
        text += "\n# every setting, defaults included\n" + yaml.safe_dump(
            config.to_dict(), sort_keys=False
        )
        self.query_one("#yaml", Static).update(highlighted(text, "yaml"))

    def load_preset_file(self, path: Path) -> bool:
        """Load a preset file into the form; a bad file is reported, nothing changes."""
        try:
            config = load_file(path)
        except ConfigError as exc:
            self.show_preset_error(str(exc))
            self.notify(str(exc), title="Cannot load preset", severity="error")
            return False
        self.show_preset_error("")
        self.show_config(config)
        self.post_message(ConfigChanged(config, edited=False))
        self.notify(f"Loaded preset {config.name}", timeout=2)
        return True

    def show_preset_error(self, message: str) -> None:
        """Say (until the next preset loads) why a preset could not be loaded; '' clears it."""
        widget = self.query_one("#preset-error", Static)
        widget.update(
            f"⚠ preset not loaded, the form keeps the previous settings: {message}"
            if message
            else ""
        )
        widget.set_class(bool(message), "-shown")

    def on_pick_list_picked(self, event: PresetList.Picked) -> None:
        """Enter on a preset loads it into the form."""
        event.stop()
        info = self.query_one(PresetList).preset_at(event.index)
        if info is not None:
            self.load_preset_file(info.path)

    def on_config_form_edited(self, event: ConfigForm.Edited) -> None:
        """Re-validate after every edit; show errors inline and keep the last valid config."""
        event.stop()
        form = self.query_one(ConfigForm)
        errors = dict(event.parse_errors)
        banner = ""
        config: LabConfig | None = None
        try:
            config = self.base.with_values(event.values)
            # A model too big for this machine is flagged here, before anyone presses start.
            check_fits_in_memory(config.model)
        except ConfigError as exc:
            key = exc.field  # a setting, a section, or None: the whole config
            text = exc.reason or str(exc)
            if key in FIELDS and key not in errors:
                errors[key] = text
            elif key not in errors:
                banner = f"{key}: {text}" if key else text
        if errors or banner or config is None:
            form.show_errors(errors, banner)
            first = next(iter(errors.items()), None)
            message = f"{FIELDS[first[0]].label}: {first[1]}" if first else banner
            self._show_yaml(self.config, stale="invalid edit: " + message)
            self.query_one(ModelSummary).show_invalid(message)
            self.post_message(ConfigInvalid(message))
            return
        form.show_errors({})
        self.config = config
        self.edited = config.to_dict() != self.base.to_dict()
        self._update_titles()
        self._show_yaml(config)
        self.post_message(ConfigChanged(config, edited=self.edited))

    def on_config_form_field_focused(self, event: ConfigForm.FieldFocused) -> None:
        """Show the focused field's setting name and meaning under the form."""
        event.stop()
        self.query_one("#form-help", TextLine).update(event.help)

    # ---- actions ------------------------------------------------------------------

    def action_focus_presets(self) -> None:
        """Move focus to the preset list."""
        self.query_one(PresetList).focus()

    def action_focus_form(self) -> None:
        """Move focus to the first form field."""
        self.query_one(ConfigForm).focus_first()

    def action_revert(self) -> None:
        """Drop all edits: back to the preset as loaded."""
        self.show_preset_error("")
        self.show_config(self.base)
        self.post_message(ConfigChanged(self.base, edited=False))
        self.notify(f"Reverted to preset {self.base.name}", timeout=2)

    def action_save_as(self) -> None:
        """Ask for a name and write the edited settings as a preset YAML."""
        from tui_lab.ui.screens.save_preset import SavePresetScreen

        if self.query_one(ConfigForm).has_errors:
            self.notify("Fix the marked fields before saving", severity="warning")
            return

        def saved(path: Path | None) -> None:
            if path is not None:
                self.query_one(PresetList).reload(select=path)
                self.base = self.config = load_file(path)
                self.edited = False
                self._update_titles()
                self._show_yaml(self.config)
                self.notify(f"Saved preset to {path}", title="Preset saved")

        self.app.push_screen(SavePresetScreen(self.config, self.user_dir), saved)

    def show_report(self, report: ParamReport, vocab_size: int) -> None:
        """Show the live parameter count for the current config."""
        self.query_one(ModelSummary).show_report(report, vocab_size, self.edited)
