"""Lab configuration: a whole preset as one frozen ``LabConfig``, and how it is read.

A preset is YAML with up to three sections (``model``, ``task``, ``train``,
defined in ``config_sections``) plus a ``description``; it states only what
differs from the defaults. Loading is strict: duplicate keys, unknown keys
(with the closest valid name suggested), wrong types and impossible relations
are refused with one ``ConfigError`` line that names the file and the field,
before anything is allocated. Whether a model fits in this machine's memory
is not part of validity (a run folder must load on any machine): the model
builder asks ``check_fits_in_memory`` just before it allocates.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_lab.core.config.error import (
    ConfigError,
    field_error,
    show,
    show_key,
    suggest,
    with_source,
)
from tui_lab.core.config.sections import (
    ACTIVATIONS,
    ARCHS,
    DECAY_CLOCKS,
    DEVICES,
    FULL_BATCH_TASKS,
    NORMS,
    POSITIONALS,
    PRECISIONS,
    SCHEDULES,
    TASKS,
    ModelConfig,
    TaskConfig,
    TrainConfig,
)
from tui_lab.core.config.shape import Shape
from tui_lab.core.config.strict_yaml import dump_yaml, parse_yaml

__all__ = [
    "ACTIVATIONS",
    "ARCHS",
    "DEVICES",
    "NORMS",
    "POSITIONALS",
    "PRECISIONS",
    "SCHEDULES",
    "DECAY_CLOCKS",
    "SECTIONS",
    "TASKS",
    "TRAIN_BYTES_PER_PARAM",
    "ConfigError",
    "LabConfig",
    "ModelConfig",
    "TaskConfig",
    "TrainConfig",
    "available_memory_bytes",
    "check_fits_in_memory",
    "default_config",
    "from_dict",
    "from_yaml",
    "load_file",
]

# Bytes per parameter while training with AdamW in fp32: weight, grad, two moments.
TRAIN_BYTES_PER_PARAM = 16

SECTIONS: dict[str, type] = {"model": ModelConfig, "task": TaskConfig, "train": TrainConfig}

if TYPE_CHECKING:
    from _typeshed import DataclassInstance



@dataclass(frozen=True)
class LabConfig:
    """A whole preset: where it came from, and its three sections."""

    name: str = "copy"
    description: str = ""
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    source: str = "<defaults>"

    def __post_init__(self) -> None:
        m, t = self.model, self.task
        if t.name in ("char-lm", "induction", "modular-addition", "token-lm") and m.shape is not Shape.DECODER_ONLY:
            raise field_error("task.name", f"{t.name} needs model.arch: decoder-only")
        if (t.name == "masked-lm") != (m.shape is Shape.ENCODER_ONLY):
            raise field_error(
                "task.name" if m.shape is Shape.ENCODER_ONLY else "model.arch",
                "an encoder-only model trains on masked-lm, and masked-lm needs model.arch: encoder-only",
            )
        if t.name == "translation" and m.shape is not Shape.ENCODER_DECODER:
            raise field_error("task.name", "translation needs model.arch: encoder-decoder")
        if self.train.full_batch and t.name not in FULL_BATCH_TASKS:
            raise field_error(
                "train.full_batch",
                f"needs a task with a finite training set ({', '.join(FULL_BATCH_TASKS)}), not {t.name}",
            )
        need = self.sequence_length_needed()
        if need > m.max_len:
            raise field_error(
                "model.max_len",
                f"{m.max_len} is too short for this task (sequences need {need} positions)",
            )

    def sequence_length_needed(self) -> int:
        """Longest sequence (source or target, with BOS/EOS/SEP) the task produces."""
        t = self.task
        if t.name in ("char-lm", "induction", "token-lm", "masked-lm"):  # fixed-length windows
            return t.block_size
        if t.name == "translation":  # a real translator's text: checked against its context when typed
            return 2
        if t.name == "modular-addition":  # a b = answer: one token each, no EOS
            return 4
        if t.name == "addition":
            src = 2 * t.max_digits + 1
            tgt = t.max_digits + 1
        else:
            src = tgt = t.max_len
        if self.model.shape is Shape.DECODER_ONLY:
            return src + tgt + 2  # input, SEP, answer, EOS
        return max(src, tgt) + 1  # BOS or EOS

    def to_dict(self) -> dict[str, Any]:  # YAML-ready; callers index its sections by name
        """Every setting, as plain YAML-ready values."""
        return {
            "description": self.description,
            "model": _section_dict(self.model),
            "task": _section_dict(self.task),
            "train": _section_dict(self.train),
        }

    def diff_dict(self) -> dict[str, object]:
        """Only the settings that differ from the defaults (what a preset file holds)."""
        out: dict[str, object] = {}
        if self.description:
            out["description"] = self.description
        for name, cls in SECTIONS.items():
            current = _section_dict(getattr(self, name))
            base = _section_dict(cls())
            changed = {k: v for k, v in current.items() if base[k] != v}
            if changed:
                out[name] = changed
        return out

    def to_yaml(self, full: bool = False) -> str:
        """The preset file's text (``full``: every setting, as a run's config.yaml), block style."""
        return dump_yaml(self.to_dict() if full else self.diff_dict())

    def with_values(self, values: dict[str, object]) -> LabConfig:
        """A new config with dotted keys (``"model.d_model"``) replaced, fully re-validated."""
        data = self.to_dict()
        for dotted, value in values.items():
            section, _, key = dotted.partition(".")
            if section not in SECTIONS or not key:
                raise field_error(dotted, "not a setting (use model.*, task.* or train.*)")
            data[section][key] = value
        return from_dict(data, source=self.source, name=self.name)


def _section_dict(obj: DataclassInstance) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def available_memory_bytes() -> int:
    """Physical memory of this machine (a ceiling for what a model may ask)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def check_fits_in_memory(model: ModelConfig, vocab_size: int | None = None) -> None:
    """Refuse a model whose training state could not fit in this machine's memory.

    Called where a model is about to be built, not when a config is made: the
    answer depends on the machine, and a config must mean the same everywhere.
    """
    params = model.estimated_params(vocab_size)
    need = params * TRAIN_BYTES_PER_PARAM
    have = available_memory_bytes()
    if need > have:
        reason = (
            f"about {params:,} parameters need ~{need / 2**30:.1f} GiB to train, "
            f"more than this machine's {have / 2**30:.1f} GiB; reduce d_model, d_ff, "
            f"layers or vocab_size"
        )
        raise ConfigError(f"model: {reason}", reason=reason)


def _coerce(path: str, value: object, hint: object) -> object:
    """Check ``value`` against a field's type hint; ints are accepted for floats.

    ``path`` is the dotted field, with ``[i]`` for an item of a list.
    """
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(path, value, inner[0])
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:  # tuple[int, ...]: any length
        if not isinstance(value, (list, tuple)):
            raise _type_error(path, f"expected a list, got {show(value)}")
        return tuple(_coerce(f"{path}[{i}]", v, args[0]) for i, v in enumerate(value))
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise _type_error(path, f"expected a list of {len(args)} numbers, got {show(value)}")
        return tuple(_coerce(f"{path}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args, strict=True)))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _type_error(path, f"expected true or false, got {show(value)}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _type_error(path, f"expected a whole number, got {show(value)}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise _type_error(path, f"expected a finite number, got {show(value)}")
            return float(value)
        raise _type_error(path, f"expected a number, got {show(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise _type_error(path, f"expected text, got {show(value)}")
    return value


def _type_error(path: str, reason: str) -> ConfigError:
    """``path: reason``; for a list item (``train.betas[1]``) the field is the list."""
    name, bracket, index = path.partition("[")
    if not bracket:
        return field_error(path, reason)
    return ConfigError(f"{path}: {reason}", field=name, reason=f"item {index.rstrip(']')}: {reason}")


@functools.cache
def _type_hints(cls: type) -> dict[str, object]:
    """A section's field types, resolved once (resolving costs ~1 ms, paid per config read)."""
    return typing.get_type_hints(cls)


def _build_section(section: str, data: object) -> Any:  # the section's dataclass (LabConfig's keyword)
    cls = SECTIONS[section]
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise field_error(section, f"expected a mapping of settings, got {type(data).__name__}")
    hints = _type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise field_error(f"{section}.{show_key(key)}", f"unknown setting{suggest(key, names)}")
        kwargs[key] = _coerce(f"{section}.{key}", value, hints[key])
    return cls(**kwargs)


def from_dict(data: object, source: str = "<dict>", name: str | None = None) -> LabConfig:
    """Validate a parsed preset; errors are ConfigError prefixed with ``source``."""
    try:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            reason = f"expected a mapping with model/task/train sections, got {type(data).__name__}"
            raise ConfigError(reason, reason=reason)
        allowed = ["description", *SECTIONS]
        for key in data:
            if key not in allowed:
                raise field_error(show_key(key), f"unknown section{suggest(key, allowed)}")
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise field_error("description", f"expected text, got {show(description)}")
        sections = {s: _build_section(s, data.get(s)) for s in SECTIONS}
        return LabConfig(
            name=name or Path(source).stem,
            description=description.strip(),
            source=source,
            **sections,
        )
    except ConfigError as exc:
        raise with_source(exc, source) from None


def from_yaml(text: str, source: str, name: str | None = None) -> LabConfig:
    """Parse and validate preset YAML (duplicate keys refused); errors name ``source``."""
    data = parse_yaml(text, source)
    if data is None:
        reason = "the file is empty (a preset needs at least a description)"
        raise ConfigError(f"{source}: {reason}", reason=reason)
    return from_dict(data, source=source, name=name)


def load_file(path: str | os.PathLike[str]) -> LabConfig:
    """Read and validate one preset file."""
    p = Path(path)

    def refuse(reason: str) -> ConfigError:
        return ConfigError(f"{p}: {reason}", reason=reason)

    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise refuse("no such preset file") from None
    except IsADirectoryError:
        raise refuse("is a folder, not a preset file") from None
    except OSError as exc:
        raise refuse(f"cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("not a text file (expected UTF-8 YAML)") from None
    if "\x00" in text:
        raise refuse("not a text file (expected UTF-8 YAML)")
    return from_yaml(text, source=str(p), name=p.stem)


def default_config() -> LabConfig:
    """The embedded default: presets/copy.yaml's settings (a test keeps the two equal).

    Used when the shipped preset files are missing, so `tfx-lab` always opens.
    """
    return from_dict(
        {
            "description": "Copy a digit string (the default preset).",
            "model": {"n_encoder_layers": 1, "n_decoder_layers": 1},
            "train": {"steps": 1000, "lr": 3e-3, "warmup_steps": 50, "target_accuracy": 0.995},
        },
        source="<embedded copy>",
        name="copy",
    )
