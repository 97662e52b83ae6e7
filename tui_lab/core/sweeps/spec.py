"""A sweep: a preset, settings to vary, seeds; and its plan, one run folder per arm x seed.

A spec comes from the command line (``--preset P --vary KEY=A,B``) or a YAML
file with the same fields (``preset``, ``vary: {key: [values]}``, ``seeds``,
``parallel``, ``steps``, ``max_seconds``, ``out``, and ``set: {key: value}``
for settings every arm shares, e.g. a higher learning rate); shipped ones live in
``presets/sweeps/`` and are named like presets. ``plan_sweep`` validates every
arm's config through ``LabConfig.with_values`` before anything starts, so a
typo in the last arm is refused with one line and no folder is made.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from tui_lab.core.config.diff import format_value
from tui_lab.core.config.error import show, suggest
from tui_lab.core.config.lab_config import ConfigError, LabConfig
from tui_lab.core.config.presets import SHIPPED_DIR, load_preset
from tui_lab.core.config.strict_yaml import parse_yaml

SWEEPS_DIR = SHIPPED_DIR / "sweeps"
FIELDS = ("preset", "vary", "set", "seeds", "parallel", "steps", "max_seconds", "out", "description")
# Set by the sweep itself, per run: varying them would make two runs one folder.
_RESERVED = {"train.seed": "set by seeds, not vary"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep. ``vary`` keeps its keys' order: the first key changes slowest."""

    preset: str | None
    vary: dict[str, list[object]]
    set: dict[str, object] = field(default_factory=dict)
    seeds: int = 1
    parallel: int | None = None
    steps: int | None = None
    max_seconds: float | None = None
    out: str | None = None
    description: str = ""

    def to_dict(self) -> dict[str, object]:
        return {f: getattr(self, f) for f in FIELDS}


@dataclass(frozen=True)
class Arm:
    """One combination of varied values; ``label`` names it in tables and folders."""

    label: str
    values: dict[str, object]


@dataclass(frozen=True)
class PlannedRun:
    """One arm x seed: its folder and the full config it trains."""

    name: str
    arm: Arm
    seed: int
    folder: Path
    config: LabConfig


@dataclass(frozen=True)
class SweepPlan:
    spec: SweepSpec
    out: Path
    base: LabConfig
    arms: list[Arm]
    runs: list[PlannedRun] = field(default_factory=list)
    common: LabConfig | None = None  # base with what every arm shares (set, steps, max_seconds)


def _refuse(field_name: str, reason: str) -> ConfigError:
    return ConfigError(f"{field_name}: {reason}", field=field_name, reason=reason)


def parse_value(text: str) -> object:
    """A ``--vary`` value as a preset would read it: 3 -> int, 3e-3 -> float, true, null, text."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_vary(items: list[str]) -> dict[str, list[object]]:
    """``["model.norm=pre,post", ...]`` -> ``{"model.norm": ["pre", "post"]}``."""
    out: dict[str, list[object]] = {}
    for item in items:
        key, eq, values = item.partition("=")
        key = key.strip()
        if not eq or not key or not values.strip():
            raise _refuse("--vary", f"expected KEY=V1,V2 (e.g. model.norm=pre,post), got {show(item)}")
        if key in out:
            raise _refuse(key, "given to --vary twice; list all its values in one --vary")
        out[key] = [parse_value(v) for v in values.split(",")]
    return out


def resolve_sweep(name_or_path: str) -> Path:
    """A spec file by path, or a shipped sweep by name (``ln-warmup``)."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path or os.sep in name_or_path:
        return Path(name_or_path).expanduser()
    path = SWEEPS_DIR / f"{name_or_path}.yaml"
    if path.is_file():
        return path
    names = sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))
    reason = f"no such sweep{suggest(name_or_path, names)}; shipped: {', '.join(names) or 'none'}"
    raise ConfigError(f"{name_or_path}: {reason}", reason=reason)


def load_sweep_spec(name_or_path: str) -> SweepSpec:
    """Read and check a sweep spec file; errors name the file and the field."""
    path = resolve_sweep(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        reason = f"cannot read the sweep spec ({exc.strerror or exc})"
        raise ConfigError(f"{path}: {reason}", reason=reason) from None
    data = parse_yaml(text, str(path))
    try:
        return spec_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}", field=exc.field, reason=exc.reason) from None


def spec_from_dict(data: object) -> SweepSpec:
    """A SweepSpec from parsed YAML (or a ``sweep.json``'s spec), type-checked."""
    if not isinstance(data, dict):
        raise _refuse("spec", "expected a mapping with preset, vary, seeds, ...")
    for key in data:
        if key not in FIELDS:
            raise _refuse(str(key), f"unknown sweep field{suggest(key, FIELDS)}")
    vary = data.get("vary") or {}  # none: one arm, the preset itself, over seeds
    if not isinstance(vary, dict):
        raise _refuse("vary", "expected a mapping of settings to lists of values")
    clean: dict[str, list[object]] = {}
    for key, values in vary.items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise _refuse(str(key), "no values to vary over")
        clean[str(key)] = values
    fixed = data.get("set") or {}
    if not isinstance(fixed, dict):
        raise _refuse("set", "expected a mapping of settings to values")
    preset = data.get("preset")
    if preset is not None and not isinstance(preset, str):
        raise _refuse("preset", f"expected a preset name or path, got {show(preset)}")
    return SweepSpec(
        preset=preset,
        vary=clean,
        set={str(k): v for k, v in fixed.items()},
        seeds=_whole(data, "seeds", 1),
        parallel=_whole(data, "parallel", None),
        steps=_whole(data, "steps", None),
        max_seconds=_positive_number(data, "max_seconds"),
        out=str(data["out"]) if data.get("out") is not None else None,
        description=str(data.get("description") or "").strip(),
    )


@overload
def _whole(data: dict[str, object], key: str, default: int) -> int: ...
@overload
def _whole(data: dict[str, object], key: str, default: None) -> int | None: ...
def _whole(data: dict[str, object], key: str, default: int | None) -> int | None:
    """``data[key]`` as a whole number >= 1; missing or null (``seeds: ~``) is ``default``."""
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse(key, f"expected a whole number >= 1, got {show(value)}")
    return value


def _positive_number(data: dict[str, object], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _refuse(key, f"expected a number > 0, got {show(value)}")
    return float(value)


def arm_label(values: dict[str, object]) -> str:
    """``norm=post+warmup_steps=0``: each key's last part, unless two varied keys share it.

    Safe as a folder name (anything but letters, digits and ``._=+-`` becomes ``_``).
    """
    shorts = [k.rpartition(".")[2] for k in values]
    use_full = len(set(shorts)) < len(shorts)
    parts = [f"{k if use_full else s}={format_value(v)}" for (k, v), s in zip(values.items(), shorts, strict=True)]
    return _UNSAFE.sub("_", "+".join(parts))


def plan_sweep(spec: SweepSpec, out: Path, max_threads: int = 0, pinned: bool = False) -> SweepPlan:
    """Every arm x seed with its validated config; ConfigError (one line) on the first bad one.

    ``max_threads`` is each run's share of cores. A preset asking for more gets
    ``train.threads`` cut to it; an automatic one (0) stays automatic when the
    run is ``pinned`` to its cores (the lab's rule then picks within them: one
    thread for small models), and is set to the share otherwise.
    """
    for key, reason in _RESERVED.items():
        if key in spec.vary or key in spec.set:
            raise _refuse(key, reason)
    base = load_preset(spec.preset)
    overrides: dict[str, object] = dict(spec.set)
    if spec.steps is not None:
        overrides["train.steps"] = spec.steps
    if spec.max_seconds is not None:
        overrides["train.max_seconds"] = spec.max_seconds
    own = base.train.threads
    if max_threads and (own > max_threads or (own == 0 and not pinned)):
        overrides["train.threads"] = max_threads
    keys = list(spec.vary)
    arms = [Arm(arm_label(dict(zip(keys, combo, strict=True))) or base.name, dict(zip(keys, combo, strict=True)))
            for combo in itertools.product(*(spec.vary[k] for k in keys))]
    if len({a.label for a in arms}) < len(arms):
        raise _refuse("vary", "two arms have the same values; list each value once")
    runs = []
    for arm in arms:
        for i in range(spec.seeds):
            seed = base.train.seed + i
            values = {**arm.values, **overrides, "train.seed": seed}
            try:
                config = base.with_values(values)
            except ConfigError as exc:
                # The field and why, without the preset's path: the mistake is in --vary.
                where = f"{exc.field}: " if exc.field else ""
                raise ConfigError(f"{where}{exc.reason or exc}", field=exc.field, reason=exc.reason) from None
            name = f"{arm.label}-s{seed}"
            runs.append(PlannedRun(name, arm, seed, out / name, config))
    common = base.with_values(overrides) if overrides else base
    return SweepPlan(spec=spec, out=out, base=base, arms=arms, runs=runs, common=common)
