"""The config the lab starts on: the preset asked for, or the settings of the run it opens.

Read before the first frame (YAML only, no torch), so that every pane shows an
opened run's own settings from the start rather than the default preset's.
"""

from __future__ import annotations

from pathlib import Path

from tui_lab.core.config.lab_config import ConfigError, LabConfig, default_config
from tui_lab.core.config.presets import load_preset
from tui_lab.core.errors import LabError
from tui_lab.core.runs.folder import RunFolder


def read_run_config(run_dir: Path) -> LabConfig | None:
    """The config a run folder was trained with, named after its preset; None if unreadable.

    An unreadable folder is not reported here: the Train pane, which opens the
    run, says what is wrong with it.
    """
    try:  # a run being watched may not have saved yet: no state.json needed
        return RunFolder.read(run_dir, need_state=False).preset_config
    except LabError:  # RunError: a missing or damaged folder
        return None


def starting_config(preset: str | None, run_dir: Path | None) -> tuple[LabConfig, str | None]:
    """(the lab's first config, why the preset could not be loaded or None)."""
    if run_dir is not None:
        config = read_run_config(run_dir)
        if config is not None:
            return config, None
    try:
        return load_preset(preset), None
    except ConfigError as exc:
        return default_config(), str(exc)
