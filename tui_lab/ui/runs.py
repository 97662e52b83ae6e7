"""The run folders the lab offers to open (the root itself is the core's ``run_folder.runs_root``)."""

from __future__ import annotations

from pathlib import Path


def list_runs(root: Path) -> list[Path]:
    """Run folders (those with a config.yaml) under ``root``, newest first."""
    try:
        runs = [p for p in root.iterdir() if (p / "config.yaml").is_file()]
    except OSError:
        return []
    return sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)
