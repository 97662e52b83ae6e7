"""How one config differs from another, as dotted settings (``model.norm=post``).

A run is named in tables and chart legends by what sets it apart from the
preset it was trained from, so two runs of a comparison read as
``model.norm=pre`` and ``model.norm=post`` instead of two timestamps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui_lab.core.config.lab_config import SECTIONS, LabConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Settings that say how a run was kept, not what was trained: a sweep pins
# threads for its share of cores, and that must not split a legend.
BOOKKEEPING = frozenset({"train.threads", "train.checkpoint_seconds"})


def flat_settings(config: LabConfig | dict[str, object]) -> dict[str, object]:
    """``{"model.d_model": 64, ...}`` for every setting of a config (or its ``to_dict()``)."""
    data = config.to_dict() if isinstance(config, LabConfig) else config
    out: dict[str, object] = {}
    for section in SECTIONS:
        values = data.get(section) or {}
        if isinstance(values, dict):
            for key, value in values.items():
                out[f"{section}.{key}"] = list(value) if isinstance(value, tuple) else value
    return out


def default_settings() -> dict[str, object]:
    """Every setting at its dataclass default (what a preset file leaves out)."""
    return flat_settings({name: _fields(cls()) for name, cls in SECTIONS.items()})


def _fields(obj: DataclassInstance) -> dict[str, object]:
    return {k: getattr(obj, k) for k in obj.__dataclass_fields__}


def config_difference(
    settings: dict[str, object], base: dict[str, object], skip: frozenset[str] = BOOKKEEPING
) -> dict[str, object]:
    """The settings whose values differ from ``base``, in ``settings``' order."""
    return {
        key: value
        for key, value in settings.items()
        if key not in skip and not _same(value, base.get(key, _MISSING))
    }


_MISSING = object()


def _same(a: object, b: object) -> bool:
    # 3 and 3.0 are one learning rate; a list and a tuple are one pair of betas.
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return bool(a == b)


def format_value(value: object) -> str:
    """A setting as typed in a preset: ``post``, ``0.003``, ``true``, ``null``, ``0.9,0.98``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v) for v in value)
    return str(value)


def difference_label(diff: dict[str, object]) -> str:
    """``"model.norm=post train.warmup_steps=0"``; empty when nothing differs."""
    return " ".join(f"{key}={format_value(value)}" for key, value in diff.items())
