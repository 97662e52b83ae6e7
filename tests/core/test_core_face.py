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


def test_the_issue_named_calls_take_what_the_issues_name() -> None:
    """``graph = attribute(model, text, transcoders)``, ``edge_attribution(model, pair,
    method=..., ig_steps=...)``, ``faithfulness(model, pair, edges, ...)``: the face gives the
    circuit functions, not the other modules' functions of the same name."""
    import inspect

    def params(name: str) -> list[str]:
        return list(inspect.signature(getattr(core, name)).parameters)

    assert params("attribute")[:3] == ["model", "text", "transcoders"]
    assert params("edge_attribution")[:4] == ["model", "pair", "method", "ig_steps"]
    assert params("faithfulness")[:3] == ["model", "pair", "edges"]
