"""The Build form's fields: which settings it edits, how each is shown, parsed and read."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tui_lab.core.config import lab_config as cfg
from tui_lab.core.config import sections as cfg_sections
from tui_lab.ui.panes.builder.line_edit import LineEdit


@dataclass(frozen=True)
class FieldSpec:
    """One form field: the dotted config key, its label and how it is edited."""

    key: str
    label: str
    kind: str  # int | float | seconds (any float, empty for none) | choice | bool | path
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
                hint="encoder-decoder (translation), decoder-only (GPT) or encoder-only "
                "(BERT: trains on masked-lm)",
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
                hint="output layer shares the embedding matrix (off: an untied head)",
            ),
            # The GPT-2 speedrun's options (core/config/sections.py says what each does).
            FieldSpec(
                "model.activation", "activation", "choice", cfg_sections.ACTIVATIONS,
                hint="relu2: ReLU squared, the speedrun's MLP",
            ),
            FieldSpec(
                "model.qk_norm", "QK-norm", "choice", cfg_sections.QK_NORMS,
                hint="head: RMSNorm of each head's q and k before the scores",
            ),
            FieldSpec(
                "model.zero_init_proj", "zero-init outs", "bool",
                hint="attention and MLP output projections start at zero",
            ),
            FieldSpec(
                "model.logit_softcap", "logit soft-cap", "seconds",
                hint="logits -> cap * tanh(logits / cap) (empty: off)",
            ),
        ),
    ),
    (
        "Task",
        (
            FieldSpec("task.name", "task", "choice", cfg.TASKS),
            FieldSpec(
                "task.text",
                "text file",
                "path",
                hint="char-lm, masked-lm: your own text file (empty: Python's help text)",
            ),
        ),
    ),
    (
        "Training",
        (
            FieldSpec("train.steps", "steps", "int"),
            FieldSpec("train.batch_size", "batch size", "int"),
            FieldSpec("train.lr", "learning rate", "float", hint="peak learning rate after warmup"),
            FieldSpec(
                "train.optimizer", "optimizer", "choice", cfg_sections.OPTIMIZERS,
                hint="muon: Muon on hidden matrices, AdamW (the rate above) on the rest",
            ),
            FieldSpec("train.muon_lr", "Muon rate", "float", hint="peak rate of Muon's matrices"),
            FieldSpec("train.warmup_steps", "warmup steps", "int"),
            FieldSpec("train.schedule", "schedule", "choice", cfg.SCHEDULES),
            FieldSpec(
                "train.max_seconds",
                "time limit (s)",
                "seconds",
                hint="training seconds before the run stops (empty: no limit)",
            ),
            FieldSpec(
                "train.decay_over",
                "decay over",
                "choice",
                cfg.DECAY_CLOCKS,
                hint="time: the schedule's decay ends with the time limit",
            ),
            FieldSpec("train.clip", "grad clip", "float", hint="0 turns clipping off"),
            FieldSpec("train.label_smoothing", "label smoothing", "float"),
            FieldSpec("train.seed", "seed", "int"),
            FieldSpec("train.device", "device", "choice", cfg.DEVICES),
        ),
    ),
)

FIELDS: dict[str, FieldSpec] = {f.key: f for _, fields in SECTIONS for f in fields}


def format_value(value: object) -> str:
    """A config value as the text the form shows (no value: empty)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_value(spec: FieldSpec, text: str) -> object:
    """Text typed into a field as its value; ValueError with a short reason.

    A path field's empty text means "no file" (None); a file named there is
    read and checked now (``check_text_file``), so a bad one is flagged under
    the field and the config keeps the text it had.
    """
    text = text.strip()
    if spec.kind == "path":
        return check_text_file(text) if text else None
    if spec.kind == "seconds" and not text:
        return None
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


# The smallest text char-lm takes at the default block_size (64) and val_fraction
# (0.1): both splits need a window plus one character. The form has neither
# setting, so a preset with larger ones may still refuse a file when training starts.
MIN_TEXT_CHARS = math.ceil((64 + 1) / 0.1)


def check_text_file(path: str) -> str:
    """``path`` if it is a usable char-lm text; ValueError with the reason if not."""
    from tui_lab.core.config.error import ConfigError
    from tui_lab.core.tasks.text import read_text_file

    try:
        stat = Path(path).expanduser().stat()
        text = _read_cached(path, stat.st_mtime_ns, stat.st_size, read_text_file)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except ConfigError as exc:
        raise ValueError(exc.reason or str(exc)) from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
    if not text.strip():
        raise ValueError(f"{path} is empty")
    if len(text) < MIN_TEXT_CHARS:
        raise ValueError(f"{path} has {len(text):,} characters; char-lm needs at least {MIN_TEXT_CHARS:,}")
    return path


@lru_cache(maxsize=8)
def _read_cached(path: str, mtime_ns: int, size: int, read: Callable[[str], str]) -> str:
    """The file's cleaned text, read again only when it changes (every edit re-reads the form)."""
    return read(path)


@dataclass
class FormField:
    """A field's state: the text of a number being edited, or a choice or switch value."""

    spec: FieldSpec
    edit: LineEdit = field(default_factory=LineEdit)  # int and float fields
    value: object = None  # choice and bool fields

    @property
    def typed(self) -> bool:
        """True for a number or a path, whose text is typed (not a choice or a switch)."""
        return self.spec.kind in ("int", "float", "seconds", "path")

    @property
    def text(self) -> str:
        """What the field shows."""
        return self.edit.text if self.typed else format_value(self.value)


def load_fields(fields: list[FormField], config: cfg.LabConfig) -> None:
    """Put ``config``'s values into the fields."""
    data = config.to_dict()
    for f in fields:
        section, _, name = f.spec.key.partition(".")
        value = data[section][name]
        if f.typed:
            f.edit.set(format_value(value))
        else:
            f.value = bool(value) if f.spec.kind == "bool" else value


def read_fields(fields: list[FormField]) -> tuple[dict[str, object], dict[str, str]]:
    """(values that parsed, {key: why} for those that did not)."""
    values: dict[str, object] = {}
    errors: dict[str, str] = {}
    for f in fields:
        if f.typed:
            try:
                values[f.spec.key] = parse_value(f.spec, f.edit.text)
            except ValueError as exc:
                errors[f.spec.key] = str(exc)
        elif f.value is not None:
            values[f.spec.key] = f.value
    return values, errors
