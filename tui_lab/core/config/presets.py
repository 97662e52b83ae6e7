"""Where presets live: the shipped ones and the user's own folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tui_lab.core.config.error import suggest
from tui_lab.core.config.lab_config import ConfigError, LabConfig, default_config, load_file

DEFAULT_PRESET = "copy"
# Shipped presets sit beside the package (a link in a checkout, copied into wheels).
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "presets"


def user_preset_dir() -> Path:
    """The user's own presets: $TFX_LAB_PRESETS, else the platform config folder."""
    env = os.environ.get("TFX_LAB_PRESETS")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("tfx-lab")) / "presets"


@dataclass(frozen=True)
class PresetInfo:
    """One entry of the preset list; ``description`` is the first line of the preset's."""

    name: str
    path: Path
    shipped: bool
    description: str = ""


def _first_line(path: Path) -> str:
    try:
        return load_file(path).description.splitlines()[0]
    except (ConfigError, IndexError):
        return ""


def list_presets(user_dir: Path | None = None) -> list[PresetInfo]:
    """Shipped presets first, then the user's; a user preset with a shipped name is listed too."""
    out = []
    for folder, shipped in ((SHIPPED_DIR, True), (user_dir or user_preset_dir(), False)):
        if folder.is_dir():
            for p in sorted(folder.glob("*.yaml")):
                out.append(PresetInfo(p.stem, p, shipped, _first_line(p)))
    return out


def resolve_preset(name_or_path: str | os.PathLike[str] | None, user_dir: Path | None = None) -> Path | None:
    """Path of a preset given by name or path; None means the embedded default."""
    if name_or_path is None:
        p = SHIPPED_DIR / f"{DEFAULT_PRESET}.yaml"
        return p if p.is_file() else None
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text:
        return Path(text).expanduser()
    for folder in (user_dir or user_preset_dir(), SHIPPED_DIR):
        p = folder / f"{text}.yaml"
        if p.is_file():
            return p
    names = sorted({i.name for i in list_presets(user_dir)})
    reason = f"no such preset{suggest(text, names)}; known: {', '.join(names)}"
    raise ConfigError(f"{text}: {reason}", reason=reason)


def load_preset(name_or_path: str | os.PathLike[str] | None = None, user_dir: Path | None = None) -> LabConfig:
    """Load a preset by name or path; with no argument, the default (embedded if not shipped)."""
    path = resolve_preset(name_or_path, user_dir)
    if path is None:
        return default_config()
    return load_file(path)
