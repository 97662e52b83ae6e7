"""Lab configuration: frozen dataclasses for the model, the task and training.

A preset is YAML with up to three sections (``model``, ``task``, ``train``)
plus a ``description``; it states only what differs from the defaults below.
Loading is strict: unknown keys (with the closest valid name suggested),
wrong types and impossible relations are refused with one line that names
the file and the field, before anything is allocated.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import reprlib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import LabError


class ConfigError(LabError):
    """A preset or override the lab refuses; ``str()`` is one line for the user."""


ARCHS = ("encoder-decoder", "decoder-only")
NORMS = ("pre", "post")
POSITIONALS = ("sinusoidal", "learned", "rope")
ACTIVATIONS = ("relu", "gelu")
TASKS = ("copy", "reverse", "sort", "addition", "char-lm")
SCHEDULES = ("noam", "cosine", "linear", "constant")
DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("auto", "fp32", "bf16")

# Bytes per parameter while training with AdamW in fp32: weight, grad, two moments.
TRAIN_BYTES_PER_PARAM = 16
# Assumed vocabulary size for the memory check when the task decides it later.
VOCAB_GUESS = 256


@dataclass(frozen=True)
class ModelConfig:
    """Architecture hyperparameters (names follow the tutorials)."""

    arch: str = "encoder-decoder"
    d_model: int = 64
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.0
    activation: str = "relu"
    norm: str = "pre"
    positional: str = "sinusoidal"
    max_len: int = 64
    tie_embeddings: bool = True
    share_embeddings: bool = True
    vocab_size: int | None = None

    def __post_init__(self) -> None:
        _choice("model.arch", self.arch, ARCHS)
        _choice("model.norm", self.norm, NORMS)
        _choice("model.positional", self.positional, POSITIONALS)
        _choice("model.activation", self.activation, ACTIVATIONS)
        for name in ("d_model", "n_heads", "d_ff", "max_len", "n_decoder_layers"):
            _positive(f"model.{name}", getattr(self, name))
        if self.arch == "encoder-decoder":
            _positive("model.n_encoder_layers", self.n_encoder_layers)
        elif self.n_encoder_layers < 0:
            raise ConfigError(f"model.n_encoder_layers: must be >= 0, got {self.n_encoder_layers}")
        if self.vocab_size is not None:
            _positive("model.vocab_size", self.vocab_size)
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model.dropout: must be in [0, 1), got {self.dropout}")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"model.d_model: {self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        if self.positional == "rope" and self.d_head % 2:
            raise ConfigError(
                f"model.positional: rope needs an even head size, "
                f"d_model/n_heads = {self.d_head}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def n_layers(self) -> int:
        """Total Transformer layers (decoder-only models have no encoder)."""
        enc = self.n_encoder_layers if self.arch == "encoder-decoder" else 0
        return enc + self.n_decoder_layers

    def estimated_params(self, vocab_size: int | None = None) -> int:
        """Rough upper bound on parameters, computed without building anything."""
        d, f = self.d_model, self.d_ff
        v = self.vocab_size or vocab_size or VOCAB_GUESS
        attn = 4 * d * d + 4 * d
        ff = 2 * d * f + d + f
        enc = self.n_encoder_layers if self.arch == "encoder-decoder" else 0
        layers = enc * (attn + ff + 4 * d) + self.n_decoder_layers * (2 * attn + ff + 6 * d)
        return layers + 3 * v * d + self.max_len * d * 2 + v


@dataclass(frozen=True)
class TaskConfig:
    """What the model learns: an algorithmic task on digit strings, or char-lm."""

    name: str = "copy"
    min_len: int = 1
    max_len: int = 10
    max_digits: int = 3
    text: str | None = None
    block_size: int = 64
    val_fraction: float = 0.1

    def __post_init__(self) -> None:
        _choice("task.name", self.name, TASKS)
        for name in ("min_len", "max_len", "max_digits", "block_size"):
            _positive(f"task.{name}", getattr(self, name))
        if self.min_len > self.max_len:
            raise ConfigError(
                f"task.min_len: {self.min_len} is greater than max_len={self.max_len}"
            )
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(f"task.val_fraction: must be in (0, 1), got {self.val_fraction}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, evaluation and run-keeping settings."""

    steps: int = 2000
    batch_size: int = 64
    micro_batch: int | None = None
    lr: float = 1e-3
    warmup_steps: int = 100
    schedule: str = "cosine"
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    clip: float = 1.0
    label_smoothing: float = 0.0
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    fused_attention: bool = True
    compile: bool = False
    threads: int = 0
    eval_every: int = 100
    eval_examples: int = 500
    target_accuracy: float | None = None
    checkpoint_seconds: float = 10.0
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        _choice("train.schedule", self.schedule, SCHEDULES)
        _choice("train.device", self.device, DEVICES)
        _choice("train.precision", self.precision, PRECISIONS)
        for name in ("steps", "batch_size", "eval_every", "eval_examples"):
            _positive(f"train.{name}", getattr(self, name))
        if self.micro_batch is not None:
            _positive("train.micro_batch", self.micro_batch)
            if self.batch_size % self.micro_batch:
                raise ConfigError(
                    f"train.micro_batch: {self.micro_batch} does not divide "
                    f"batch_size={self.batch_size}"
                )
        for name in ("warmup_steps", "weight_decay", "clip", "threads"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train.{name}: must be >= 0, got {getattr(self, name)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError(f"train.lr: must be a positive number, got {self.lr}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"train.min_lr_ratio: must be in [0, 1], got {self.min_lr_ratio}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(
                f"train.label_smoothing: must be in [0, 1), got {self.label_smoothing}"
            )
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"train.betas: two numbers in [0, 1), got {list(self.betas)}")
        if self.eps <= 0:
            raise ConfigError(f"train.eps: must be > 0, got {self.eps}")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise ConfigError(
                f"train.target_accuracy: must be in (0, 1], got {self.target_accuracy}"
            )
        if self.checkpoint_seconds <= 0:
            raise ConfigError(
                f"train.checkpoint_seconds: must be > 0, got {self.checkpoint_seconds}"
            )
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ConfigError(f"train.max_seconds: must be > 0, got {self.max_seconds}")


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
        if t.name == "char-lm" and m.arch != "decoder-only":
            raise ConfigError("task.name: char-lm needs model.arch: decoder-only")
        need = self.sequence_length_needed()
        if need > m.max_len:
            raise ConfigError(
                f"model.max_len: {m.max_len} is too short for this task "
                f"(sequences need {need} positions)"
            )
        check_fits_in_memory(m)

    def sequence_length_needed(self) -> int:
        """Longest sequence (source or target, with BOS/EOS/SEP) the task produces."""
        t = self.task
        if t.name == "char-lm":
            return t.block_size
        if t.name == "addition":
            src = 2 * t.max_digits + 1
            tgt = t.max_digits + 1
        else:
            src = tgt = t.max_len
        if self.model.arch == "decoder-only":
            return src + tgt + 2  # input, SEP, answer, EOS
        return max(src, tgt) + 1  # BOS or EOS

    def to_dict(self) -> dict[str, Any]:
        """Every setting, as plain YAML-ready values."""
        return {
            "description": self.description,
            "model": _section_dict(self.model),
            "task": _section_dict(self.task),
            "train": _section_dict(self.train),
        }

    def diff_dict(self) -> dict[str, Any]:
        """Only the settings that differ from the defaults (what a preset file holds)."""
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        for name, default in (
            ("model", ModelConfig()),
            ("task", TaskConfig()),
            ("train", TrainConfig()),
        ):
            current = _section_dict(getattr(self, name))
            base = _section_dict(default)
            changed = {k: v for k, v in current.items() if base[k] != v}
            if changed:
                out[name] = changed
        return out

    def to_yaml(self, full: bool = False) -> str:
        data = self.to_dict() if full else self.diff_dict()
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)

    def with_values(self, values: dict[str, Any]) -> LabConfig:
        """A new config with dotted keys (``"model.d_model"``) replaced, fully re-validated."""
        data = self.to_dict()
        for dotted, value in values.items():
            section, _, key = dotted.partition(".")
            if section not in SECTIONS or not key:
                raise ConfigError(f"{dotted}: not a setting (use model.*, task.* or train.*)")
            data[section][key] = value
        return from_dict(data, source=self.source, name=self.name)


SECTIONS: dict[str, type] = {"model": ModelConfig, "task": TaskConfig, "train": TrainConfig}


# A preset may hold anything (a megabyte string, a YAML alias bomb that expands to
# millions of items): messages show values and names cut to a readable size, with
# control characters escaped so an error line can never drive the terminal.
_SHOW = reprlib.Repr()
_SHOW.maxlevel = 2
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlist = _SHOW.maxtuple = _SHOW.maxdict = _SHOW.maxset = 6
_SHOW.maxlong = 40


def _show(value: Any) -> str:
    """``repr(value)``, shortened: what an error message says a file held."""
    return _SHOW.repr(value)


def _name(key: Any) -> str:
    """A key as typed when it is a short printable word, else its shortened repr."""
    text = str(key)
    if isinstance(key, str) and len(text) <= 60 and text.isprintable():
        return text
    return _show(key)


def _section_dict(obj: Any) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        hint = _suggest(value, allowed)
        raise ConfigError(f"{name}: {_show(value)} is not one of {', '.join(allowed)}{hint}")


def _positive(name: str, value: int | float) -> None:
    if value <= 0:
        raise ConfigError(f"{name}: must be > 0, got {value}")


def _suggest(word: str, options: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def available_memory_bytes() -> int:
    """Physical memory of this machine (a ceiling for what a model may ask)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def check_fits_in_memory(model: ModelConfig, vocab_size: int | None = None) -> None:
    """Refuse a model whose training state could not fit in this machine's memory."""
    params = model.estimated_params(vocab_size)
    need = params * TRAIN_BYTES_PER_PARAM
    have = available_memory_bytes()
    if need > have:
        raise ConfigError(
            f"model: about {params:,} parameters need ~{need / 2**30:.1f} GiB to train, "
            f"more than this machine's {have / 2**30:.1f} GiB; reduce d_model, d_ff, "
            f"layers or vocab_size"
        )


def _coerce(path: str, value: Any, hint: Any) -> Any:
    """Check ``value`` against a field's type hint; ints are accepted for floats."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(path, value, inner[0])
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{path}: expected a list of {len(args)} numbers, got {_show(value)}")
        return tuple(_coerce(f"{path}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args, strict=False)))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path}: expected true or false, got {_show(value)}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{path}: expected a whole number, got {_show(value)}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise ConfigError(f"{path}: expected a finite number, got {_show(value)}")
            return float(value)
        raise ConfigError(f"{path}: expected a number, got {_show(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{path}: expected text, got {_show(value)}")
    return value


def _build_section(section: str, data: Any) -> Any:
    cls = SECTIONS[section]
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise ConfigError(f"{section}: expected a mapping of settings, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise ConfigError(f"{section}.{_name(key)}: unknown setting{_suggest(key, names)}")
        kwargs[key] = _coerce(f"{section}.{key}", value, hints[key])
    return cls(**kwargs)


def from_dict(data: Any, source: str = "<dict>", name: str | None = None) -> LabConfig:
    """Validate a parsed preset; errors are ConfigError prefixed with ``source``."""
    try:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(
                f"expected a mapping with model/task/train sections, got {type(data).__name__}"
            )
        allowed = ["description", *SECTIONS]
        for key in data:
            if key not in allowed:
                raise ConfigError(f"{_name(key)}: unknown section{_suggest(str(key), allowed)}")
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise ConfigError(f"description: expected text, got {_show(description)}")
        sections = {s: _build_section(s, data.get(s)) for s in SECTIONS}
        return LabConfig(
            name=name or Path(source).stem,
            description=description.strip(),
            source=source,
            **sections,
        )
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def load_file(path: str | os.PathLike[str]) -> LabConfig:
    """Read and validate one preset file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such preset file") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a folder, not a preset file") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text file (expected UTF-8 YAML)") from None
    if "\x00" in text:
        raise ConfigError(f"{p}: not a text file (expected UTF-8 YAML)")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{p}: YAML syntax error{where}: {problem}") from None
    except RecursionError:  # PyYAML recurses once per nesting level
        raise ConfigError(f"{p}: YAML nested too deeply to be a preset") from None
    if data is None:
        raise ConfigError(f"{p}: the file is empty (a preset needs at least a description)")
    return from_dict(data, source=str(p), name=p.stem)


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
