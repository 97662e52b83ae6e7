"""The Decode pane's view and workers modules are Textual-free and torch-free on import (the lab
paints before torch loads), and the sampling fields are read or refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tui_lab.ui.panes.decode.decode_view import sampling_options

ROOT = Path(__file__).resolve().parents[4]


def test_view_and_workers_import_no_textual_and_no_torch() -> None:
    code = (
        "import sys; import tui_lab.ui.panes.decode.decode_view, tui_lab.ui.panes.decode.fill_view, "
        "tui_lab.ui.panes.decode.decode_workers, tui_lab.ui.panes.decode.steering; "
        "print(sorted(m for m in ('textual', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_sampling_fields_read_or_refused() -> None:
    assert sampling_options("0.8", "", "") == (0.8, 0, 1.0)
    assert sampling_options("1", "5", "0.9") == (1.0, 5, 0.9)
    assert sampling_options("x", "0", "1") == "temperature and top-p must be numbers and top-k a whole number"
    for bad in (("0", "0", "1"), ("1", "-1", "1"), ("1", "0", "0"), ("1", "0", "1.5")):
        assert sampling_options(*bad) == (
            "temperature must be > 0, top-k >= 0 (0 = all tokens), top-p in (0, 1]"
        )
