"""Export: the Runs pane's table as CSV (e) or JSON (E), and any screen as an SVG (f12).

Run folders come from ``tests/data/make_pane_runs.py`` (no training); the app
runs without torch, so each test takes about a second.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path

from textual.app import App

from tests.data.make_pane_runs import write_pane_runs
from tests.ui.helpers import SIZE, runs_pane, tiny_app, wait_until
from tui_lab.core.runs.summary import CSV_COLUMNS, RunSummary
from tui_lab.ui.export import SCREENSHOTS, save_svg, write_runs_table
from tui_lab.ui.user_keymap import bindings_of

ROOT = Path("runs")


def _notes(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(n.message) for n in app._notifications]


async def test_runs_table_exports_as_csv_and_json() -> None:
    write_pane_runs(ROOT)
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        names = [r.summary.name for r in pane.shown]
        await pilot.press("e")
        await wait_until(pilot, lambda: list(ROOT.glob("runs-*.csv")), 5, "the CSV file")
        await pilot.press("E")
        await wait_until(pilot, lambda: list(ROOT.glob("runs-*.json")), 5, "the JSON file")
        [csv_path] = ROOT.glob("runs-*.csv")
        [json_path] = ROOT.glob("runs-*.json")
        notes = _notes(app)
        assert any(str(csv_path) in n for n in notes), notes
        assert any(str(json_path) in n for n in notes), notes
    with csv_path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [r["name"] for r in rows] == names  # the table's order
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert isinstance(data, list) and [d["name"] for d in data] == names
    assert {"label", "date", "status", "best_exact_match"} <= set(data[0])


async def test_f12_saves_the_screen_as_svg_overlay_included() -> None:
    write_pane_runs(ROOT)
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        await pilot.press("space")  # one run marked: the overlay chart has a series
        await pilot.press("f12")
        folder = ROOT / SCREENSHOTS
        await wait_until(pilot, lambda: list(folder.glob("runs-*.svg")), 5, "the SVG file")
        [svg] = folder.glob("runs-*.svg")
        assert any(str(svg) in n for n in _notes(app))
        assert pane.marked
        await pilot.press("1", "f12")  # another pane, another file
        await wait_until(pilot, lambda: list(folder.glob("build-*.svg")), 5, "the Build SVG")
    text = svg.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<svg")
    assert "Runs" in text


async def test_export_keys_are_in_help_and_bindings() -> None:
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")  # help lists the mounted panes: Runs is built when first shown
        await wait_until(pilot, lambda: app.pane("runs") is not None, 10, "the Runs pane")
        sections = dict(app.help_sections())
        everywhere = dict(sections["Everywhere"])
        assert "SVG" in everywhere["f12"]
        runs = dict(sections["6 Runs"])
        assert "csv" in runs["e"] and "json" in runs["E"]
    assert any(b.action == "save_svg" for b in bindings_of(type(app)))


def test_write_runs_table_does_not_overwrite(tmp_path: Path) -> None:
    rows = [RunSummary(path="a", name="a", status="finished")]
    now = datetime(2026, 1, 2, 3, 4, 5)
    first = write_runs_table(rows, tmp_path, "csv", now)
    second = write_runs_table(rows, tmp_path, "csv", now)
    assert first.name == "runs-20260102-030405.csv"
    assert second.name == "runs-20260102-030405-2.csv"
    assert first.read_text().splitlines()[0] == ",".join(CSV_COLUMNS)


async def test_save_svg_works_in_any_app_and_says_when_it_cannot_write(tmp_path: Path) -> None:
    """The screenshot is a function over an app, not a part of LabApp: any app can call it."""
    app: App[None] = App()
    async with app.run_test(size=SIZE) as pilot:
        saved = save_svg(app, tmp_path, "")
        assert saved is not None and saved.parent == tmp_path / SCREENSHOTS
        assert saved.name.startswith("lab-") and saved.read_text().lstrip().startswith("<svg")
        blocked = tmp_path / "a-file"
        blocked.write_text("not a folder")
        assert save_svg(app, blocked, "train") is None
        await pilot.pause()
        assert any("Screenshot not saved" in n for n in _notes(app))
