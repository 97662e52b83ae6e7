"""Where the lab puts run folders: ``--runs-dir``, else ``$TFX_LAB_RUNS``, else ``./runs``.

A new run goes to ``<root>/<preset>-<YYYYmmdd-HHMMSS>`` (created by the core's
``checkpoint.new_run_dir`` when training starts).
"""

from __future__ import annotations

import os
from pathlib import Path

RUNS_ENV = "TFX_LAB_RUNS"


def runs_root(override: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds run folders."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get(RUNS_ENV)
    return Path(env).expanduser() if env else Path("runs")


def list_runs(root: Path) -> list[Path]:
    """Run folders (those with a config.yaml) under ``root``, newest first."""
    try:
        runs = [p for p in root.iterdir() if (p / "config.yaml").is_file()]
    except OSError:
        return []
    return sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)
