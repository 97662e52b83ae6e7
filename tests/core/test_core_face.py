"""tui_lab.core's face: every name it promises resolves, lazily, to the module that owns it."""

from __future__ import annotations

import subprocess
import sys

import tui_lab.core as core


def test_every_listed_name_is_on_the_face_and_owned_where_it_says() -> None:
    assert set(core.__all__) == set(core._FACE)
    for name in core.__all__:
        value = getattr(core, name)
        assert value.__module__ == core._FACE[name], name


def test_importing_the_face_loads_no_torch() -> None:
    code = "import sys, tui_lab.core; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
