"""The Build pane's form over the key hyperparameters, with an inline error per field."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, Static

from tui_lab.core import config as cfg
from tui_lab.core.config import LabConfig


@dataclass(frozen=True)
class FieldSpec:
    """One form field: the dotted config key, its label and how it is edited."""

    key: str
    label: str
    kind: str  # int | float | choice | bool
    choices: tuple[str, ...] = ()
    hint: str = ""


SECTIONS: tuple[tuple[str, tuple[FieldSpec, ...]], ...] = (
    (
        "Model",
        (
            FieldSpec(
                "model.arch",
                "architecture",
                "choice",
                cfg.ARCHS,
                hint="encoder-decoder (translation) or decoder-only (GPT)",
            ),
            FieldSpec("model.d_model", "d_model", "int", hint="width of every token vector"),
            FieldSpec("model.n_heads", "n_heads", "int", hint="must divide d_model"),
            FieldSpec("model.n_encoder_layers", "encoder layers", "int"),
            FieldSpec("model.n_decoder_layers", "decoder layers", "int"),
            FieldSpec("model.d_ff", "d_ff", "int", hint="feed-forward hidden size"),
            FieldSpec("model.dropout", "dropout", "float", hint="in [0, 1)"),
            FieldSpec(
                "model.norm",
                "norm",
                "choice",
                cfg.NORMS,
                hint="LayerNorm before (pre) or after (post) each block",
            ),
            FieldSpec("model.positional", "positions", "choice", cfg.POSITIONALS),
            FieldSpec(
                "model.tie_embeddings",
                "tied embeddings",
                "bool",
                hint="output layer shares the embedding matrix",
            ),
        ),
    ),
    ("Task", (FieldSpec("task.name", "task", "choice", cfg.TASKS),)),
    (
        "Training",
        (
            FieldSpec("train.steps", "steps", "int"),
            FieldSpec("train.batch_size", "batch size", "int"),
            FieldSpec("train.lr", "learning rate", "float", hint="peak learning rate after warmup"),
            FieldSpec("train.warmup_steps", "warmup steps", "int"),
            FieldSpec("train.schedule", "schedule", "choice", cfg.SCHEDULES),
            FieldSpec("train.clip", "grad clip", "float", hint="0 turns clipping off"),
            FieldSpec("train.label_smoothing", "label smoothing", "float"),
            FieldSpec("train.seed", "seed", "int"),
            FieldSpec("train.device", "device", "choice", cfg.DEVICES),
        ),
    ),
)

FIELDS: dict[str, FieldSpec] = {f.key: f for _, fields in SECTIONS for f in fields}


def _field_id(key: str) -> str:
    return "field-" + key.replace(".", "-")


def format_value(value: object) -> str:
    """A config value as the text the form shows."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_value(spec: FieldSpec, text: str) -> object:
    """Text typed into a numeric field as a number; ValueError with a short reason."""
    text = text.strip()
    if not text:
        raise ValueError("needs a value")
    if spec.kind == "int":
        try:
            return int(text.replace("_", ""))
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


class FieldInput(Input):
    """A one-line number input; up/down move between fields like a form."""

    BINDINGS = [
        Binding("down", "app.focus_next", "Next field", show=False),
        Binding("up", "app.focus_previous", "Previous field", show=False),
    ]


class ConfigForm(VerticalScroll):
    """Edits a LabConfig's key settings; reports edits, shows errors it is given."""

    @dataclass
    class Edited(Message):
        """A field changed: the parsed values and the fields that did not parse."""

        form: ConfigForm
        values: dict[str, object]
        parse_errors: dict[str, str]

    def compose(self) -> ComposeResult:
        yield Static("", id="form-banner", classes="field-error")
        for title, fields in SECTIONS:
            yield Label(title, classes="form-section")
            for spec in fields:
                fid = _field_id(spec.key)
                with Horizontal(classes="field-row", id=f"{fid}-row"):
                    yield Label(spec.label, classes="field-label")
                    yield self._control(spec, fid)
                yield Static("", id=f"{fid}-error", classes="field-error")

    @staticmethod
    def _control(spec: FieldSpec, fid: str) -> Widget:
        if spec.kind == "choice":
            return Select(
                [(c, c) for c in spec.choices],
                allow_blank=False,
                compact=True,
                id=fid,
                classes="field-control",
            )
        if spec.kind == "bool":
            return Checkbox("", compact=True, id=fid, classes="field-control")
        return FieldInput(compact=True, id=fid, classes="field-control", select_on_focus=False)

    @property
    def has_errors(self) -> bool:
        """True while any field (or the banner) shows an error."""
        return bool(self.query(".field-row.-invalid")) or self.query_one("#form-banner").has_class(
            "-shown"
        )

    def focus_first(self) -> None:
        """Focus the first field."""
        self.control(next(iter(FIELDS))).focus()

    def control(self, key: str) -> Widget:
        """The widget that edits ``key``."""
        return self.query_one(f"#{_field_id(key)}")

    def load(self, config: LabConfig) -> None:
        """Show ``config``'s values (without reporting them as edits) and clear errors."""
        data = config.to_dict()
        self._loaded = True
        self._values_loaded = True
        with self.prevent(Input.Changed, Select.Changed, Checkbox.Changed):
            for key in FIELDS:
                section, _, name = key.partition(".")
                value = data[section][name]
                widget = self.control(key)
                if isinstance(widget, Select):
                    widget.value = value
                elif isinstance(widget, Checkbox):
                    widget.value = bool(value)
                elif isinstance(widget, Input):
                    widget.value = format_value(value)
        self.show_errors({})
        self._last_report = self.read()

    def read(self) -> tuple[dict[str, object], dict[str, str]]:
        """(values that parsed, {key: why} for those that did not)."""
        values: dict[str, object] = {}
        errors: dict[str, str] = {}
        for key, spec in FIELDS.items():
            widget = self.control(key)
            if isinstance(widget, Select):
                if widget.value is not Select.NULL:
                    values[key] = widget.value
            elif isinstance(widget, Checkbox):
                values[key] = widget.value
            elif isinstance(widget, Input):
                try:
                    values[key] = parse_value(spec, widget.value)
                except ValueError as exc:
                    errors[key] = str(exc)
        return values, errors

    def show_errors(self, errors: dict[str, str], banner: str = "") -> None:
        """Mark the fields in ``errors`` and explain each below it; ``banner`` for the rest."""
        for key in FIELDS:
            fid = _field_id(key)
            message = errors.get(key, "")
            self.query_one(f"#{fid}-error", Static).update(f"↳ {message}" if message else "")
            self.query_one(f"#{fid}-error").set_class(bool(message), "-shown")
            self.query_one(f"#{fid}-row").set_class(bool(message), "-invalid")
        banner_widget = self.query_one("#form-banner", Static)
        banner_widget.update(f"⚠ {banner}" if banner else "")
        banner_widget.set_class(bool(banner), "-shown")

    _loaded = False
    _last_report: tuple[dict[str, object], dict[str, str]] | None = None
    _report_pending = False

    def _schedule_report(self) -> None:
        """Report once after this batch of change events (values read when it runs)."""
        if self._loaded and not self._report_pending:
            self._report_pending = True
            self.call_after_refresh(self._report)

    def _report(self) -> None:
        self._report_pending = False
        current = self.read()
        if current == self._last_report:
            return  # an echo of load() or a no-op edit
        self._last_report = current
        values, errors = current
        self.post_message(self.Edited(self, values, errors))

    def on_input_changed(self, event: Input.Changed) -> None:
        """A number was typed: report the edit."""
        event.stop()
        self._schedule_report()

    def on_select_changed(self, event: Select.Changed) -> None:
        """A choice was picked: report the edit."""
        event.stop()
        self._schedule_report()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        """A switch was toggled: report the edit."""
        event.stop()
        self._schedule_report()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Say which setting the focused field edits, and what it means."""
        key = (event.widget.id or "").removeprefix("field-")
        spec = next((f for k, f in FIELDS.items() if k.replace(".", "-") == key), None)
        if spec is not None:
            help_text = f"{spec.key}" + (f" · {spec.hint}" if spec.hint else "")
            self.post_message(self.FieldFocused(self, help_text))

    @dataclass
    class FieldFocused(Message):
        """A field got focus; ``help`` names its setting."""

        form: ConfigForm
        help: str
