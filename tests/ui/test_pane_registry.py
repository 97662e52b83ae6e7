"""The list of panes is declared once (``ui/pane_registry.py``): the keys, the tabs, help,
the palette, the header, lazy building, routing and the import contract follow it."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import pytest
from textual.binding import Binding

from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
from tui_lab.ui import pane_registry
from tui_lab.ui.lazy_panes import pane_class

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 runs
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "tui_lab" / "ui"


def _contract(contract_id: str) -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def test_the_import_contract_keeps_exactly_the_registry_panes_apart() -> None:
    """pyproject's ``ui-panes-independent`` lists each registered pane's package, in tab order."""
    assert _contract("ui-panes-independent")["modules"] == pane_registry.pane_packages()
    assert "tui_lab.ui.panes.builder" in pane_registry.pane_packages()  # not build/ (a build output's name)


def test_every_pane_package_holds_one_registered_pane() -> None:
    """No folder under ui/panes/ is a pane the registry misses (or names twice)."""
    folders = sorted(p.name for p in (UI / "panes").iterdir() if (p / "__init__.py").exists())
    registered = sorted(p.rsplit(".", 1)[1] for p in pane_registry.pane_packages())
    assert registered == folders


def test_each_spec_names_its_pane_class_bindings_and_styles() -> None:
    for spec in pane_registry.PANES:
        cls = pane_class(spec)
        assert cls.PANE_ID == spec.id, spec.cls  # type: ignore[attr-defined]
        assert cls.BINDINGS is spec.bindings, spec.cls  # type: ignore[attr-defined]
        assert spec.styles is not None and (UI / spec.styles).is_file(), spec.styles


def test_the_pane_keys_are_the_registry_s_in_order() -> None:
    """Keys 1-N show the panes in tab order, each labelled with its title."""
    shown = [b for b in pane_registry.APP if isinstance(b, Binding) and b.action.startswith("show_pane")]
    assert [(b.key, b.description, b.action, b.id) for b in shown] == [
        (s.key, s.title, f"show_pane('{s.id}')", f"app.{s.id}") for s in pane_registry.PANES
    ]
    assert [s.key for s in pane_registry.PANES] == [str(i) for i in range(1, len(pane_registry.PANES) + 1)]
    assert pane_registry.pane_keys_text() == "1-9"  # nine panes today
    assert set(pane_registry.SCOPES) >= {s.title for s in pane_registry.PANES}


def test_the_1_n_text_follows_the_panes_that_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 55: "1-N panes" is derived, not written out."""
    monkeypatch.setattr(pane_registry, "PANES", pane_registry.PANES[:3])
    assert pane_registry.pane_keys_text() == "1-3"


async def test_tabs_header_help_and_palette_show_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each registered pane's key and title are in the tab bar and help; the header says
    "1-8 panes"; the palette offers "Go to <title>". A title changed in the registry is
    the title the tabs and help show."""
    renamed = dataclasses.replace(pane_registry.spec("params"), title="Parameters")
    panes = tuple(renamed if s.id == "params" else s for s in pane_registry.PANES)
    monkeypatch.setattr(pane_registry, "PANES", panes)
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        tabs = str(app.query_one("#tabs").render())
        sections = [title for title, _ in app.help_sections()]
        for spec in pane_registry.PANES:
            assert f" {spec.key} {spec.title} " in tabs, spec.id
            assert f"{spec.key} {spec.title}" in sections, spec.id
        assert "5 Parameters" in sections and "5 Params" not in sections
        assert "1-9 panes" in str(app.query_one("#status").render())
        field_keys = dict(dict(app.help_sections())["In text fields"])
        assert "then 1-9, q and ?" in field_keys["escape"]
        commands = {c.title for c in app.get_system_commands(app.screen)}
        assert {f"Go to {t}" for t in ("Build", "Train", "Features", "Patch")} <= commands


async def test_routing_posts_a_message_the_pane_handles() -> None:
    """An invalid form (Build's message to the app) reaches Params as a message it handles."""
    from tui_lab.ui.messages import ConfigInvalid

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.post_message(ConfigInvalid("d_model must be positive"))
        title = app.query_one("#params-title")
        await wait_until(
            pilot, lambda: "stale: d_model must be positive" in str(title.render()), 10, "Params"
        )


async def test_a_message_for_a_pane_not_built_yet_waits_for_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Runs' enter on an SAE before Features exists: Features opens it once it is built."""
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.messages import OpenSaeRequested
    from tui_lab.ui.panes.features.features_pane import FeaturesPane

    opened: list[str] = []
    monkeypatch.setattr(LabApp, "_load_core_worker", lambda self: None)  # the panes stay held
    monkeypatch.setattr(FeaturesPane, "open_folder", lambda self, folder: opened.append(folder))
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        assert app.pane("features") is None
        app.post_message(OpenSaeRequested(tmp_path / "sae"))
        await wait_until(pilot, lambda: opened == [str(tmp_path / "sae")], 30, "Features to open it")
        assert app.active_pane == "features"


def called_methods(source: str) -> set[str]:
    """The names of the methods ``source`` calls on anything but ``self`` (``x.show(...)``)."""
    return {
        node.func.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "self")
    }


def test_routing_calls_no_pane_method_by_name() -> None:
    """routing.py posts messages to the panes; it calls none of their own methods."""
    called = called_methods((UI / "routing.py").read_text(encoding="utf-8"))
    for spec in pane_registry.PANES:
        cls = pane_class(spec)
        own = {name for name, value in vars(cls).items() if callable(value) and not name.startswith("on_")}
        assert not called & own, (spec.id, sorted(called & own))
