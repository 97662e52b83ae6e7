"""The Runs pane (6): table, sort, filter, marks and the overlay chart, open, sweeps, damaged folders.

Run folders are written by ``tests/data/make_pane_runs.py`` (no training); the
open test copies the committed tiny run, which has weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.data.make_pane_runs import write_pane_runs, write_run
from tests.ui.conftest import TINY_RUN
from tests.ui.helpers import (
    RUN_RESTORE_S,
    SIZE,
    plain,
    ready,
    runs_pane,
    tiny_app,
    type_text,
    wait_until,
)
from tui_lab.core.runs.summary import RunSummary
from tui_lab.ui.panes.runs.run_rows import RunRow, cell, filter_rows, sort_rows
from tui_lab.ui.widgets.overlay_chart import OverlayChart
from tui_lab.ui.widgets.run_table import GAP, RunTable

ROOT = Path("runs")


async def _highlight(pilot, pane, name: str) -> None:  # type: ignore[no-untyped-def]
    pane.query_one(RunTable).move_to(next(r.key for r in pane.rows if r.summary.name == name))
    await pilot.pause()


def _names(pane) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.summary.name for r in pane.shown]


async def test_marking_two_runs_overlays_both_with_legends() -> None:
    write_pane_runs(ROOT)
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        for name in ("copy-post", "copy-nowarm"):
            await _highlight(pilot, pane, name)
            await pilot.press("space")
        chart = pane.query_one(OverlayChart)
        await wait_until(pilot, lambda: len(chart.labels) == 2, 10, "two series")
        assert chart.labels == ["model.norm=post", "train.warmup_steps=0"]
        await pilot.pause()
        shown = plain(chart)
        assert "model.norm=post" in shown and "train.warmup_steps=0" in shown
        legend = plain(pane.query_one("#runs-legend"))
        assert "model.norm=post" in legend and "train.warmup_steps=0" in legend
        colours = [s.colour for s in chart._data.series]
        assert len(set(colours)) == 2
        await pilot.press("m")  # validation loss, by seconds, log scale: still both
        await pilot.press("x", "l")
        assert (pane.overlay.metric, pane.overlay.by, pane.overlay.log_scale) == (
            "val_loss",
            "seconds",
            True,
        )
        assert "validation loss by seconds (log scale)" in plain(chart)
        assert [s.colour for s in chart._data.series] == colours  # fixed per run
        await _highlight(pilot, pane, "copy-post")
        await pilot.press("space")  # unmark
        await wait_until(pilot, lambda: chart.labels == ["train.warmup_steps=0"], 5)


async def test_sort_by_keys_and_header_and_filter() -> None:
    write_pane_runs(ROOT)
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        assert _names(pane) == ["broken", "copy-long", "copy-nowarm", "copy-post", "copy-pre"]
        await pilot.press("r")
        assert _names(pane)[0] == "copy-pre"
        while pane.sort_key != "val":
            await pilot.press("s")
        # lowest validation loss first; a damaged folder has none: last either way
        assert _names(pane) == ["copy-pre", "copy-nowarm", "copy-long", "copy-post", "broken"]
        await pilot.press("r")
        assert _names(pane) == ["copy-post", "copy-long", "copy-nowarm", "copy-pre", "broken"]
        table = pane.query_one(RunTable)
        keys = [c.key for c in table.columns]
        x = sum(w + GAP for w in table.widths[: keys.index("status")])
        await pilot.click(RunTable, offset=(x + 1, 0))  # the "status" header
        assert (pane.sort_key, pane.reverse) == ("status", False)
        assert _names(pane)[:2] == ["broken", "copy-nowarm"]  # damaged, finished (by name)...
        await pilot.click(RunTable, offset=(x + 1, 0))  # again: reversed
        assert (pane.sort_key, pane.reverse) == ("status", True) and _names(pane)[0] == "copy-long"
        await pilot.press("slash")
        await type_text(pilot, "norm")
        await pilot.pause()
        assert _names(pane) == ["copy-post"]
        assert app.active_pane == "runs"  # typed, not switched or sorted
        await pilot.press("escape")
        await pilot.pause()
        assert len(pane.shown) == 5 and pane.query_one(RunTable).has_focus


async def test_damaged_folder_is_a_row_that_says_why() -> None:
    write_pane_runs(ROOT)
    (ROOT / "empty-weights").mkdir()
    (ROOT / "empty-weights" / "model.safetensors").write_bytes(b"")
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        rows = {r.summary.name: r for r in pane.rows}
        assert rows["broken"].summary.status == "damaged"
        assert rows["empty-weights"].summary.status == "damaged"
        table = pane.query_one(RunTable)
        assert "config.yaml: not valid" in table.row_text(table.keys.index("runs/broken"))
        await _highlight(pilot, pane, "broken")
        assert "not valid YAML" in plain(pane.query_one("#runs-detail"))
        await pilot.press("enter")  # says why instead of opening
        await pilot.pause()
        assert app.active_pane == "runs"


async def test_enter_opens_the_run_in_the_lab() -> None:
    shutil.copytree(TINY_RUN, ROOT / "tiny-run")
    write_run(ROOT / "copy-pre")
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await runs_pane(pilot)
        await _highlight(pilot, pane, "tiny-run")
        await pilot.press("enter")
        train = app.pane("train")
        await wait_until(pilot, lambda: train.state == "ready", RUN_RESTORE_S, "the run to load")
        assert app.active_pane == "train"
        assert train.run_dir == ROOT / "tiny-run"
        assert app.config.model.d_model == 16 and app.config.name == "tiny"


async def test_an_sae_is_a_row_and_enter_opens_it_in_features() -> None:
    """An SAE trained with ``tfx-lab sae train`` is listed with its figures; enter takes it to
    Features (8), which opens it on the model in hand (here none yet, and it says so)."""
    from tests.core.runs.test_sae_runs import _train

    write_run(ROOT / "copy-pre")
    _train(ROOT / "saes" / "sae-1", tokens=1024)
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        rows = {r.summary.name: r for r in pane.rows}
        assert rows["saes/sae-1"].summary.kind == "sae" and rows["saes/sae-1"].summary.status == "finished"
        await _highlight(pilot, pane, "saes/sae-1")
        assert "EV " in plain(pane.query_one("#runs-detail"))
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.active_pane == "features", 10, "the Features pane")
        features = app.pane("features")
        await wait_until(pilot, lambda: "no model yet" in plain(features.query_one("#features-status")), 10)


async def test_sweep_runs_are_grouped_by_arm_with_a_mean_curve() -> None:
    sweep = ROOT / "demo"
    arms = []
    for arm, values, rate in (
        ("model.norm=pre", {}, 0.05),
        ("model.norm=post", {"model.norm": "post"}, 0.02),
    ):
        runs = []
        for seed in (0, 1):
            name = f"{arm.split('=')[1]}-s{seed}"
            write_run(sweep / name, values={**values, "train.seed": seed}, rate=rate + seed / 100)
            runs.append(name)
        arms.append({"label": arm, "values": values, "runs": runs})
    (sweep / "sweep.json").write_text(json.dumps({"arms": arms}))
    write_run(ROOT / "lone")
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        assert {r.summary.name: r.arm for r in pane.rows}["demo/post-s1"] == "model.norm=post"
        assert _names(pane)[:2] == ["demo/post-s0", "demo/post-s1"]  # an arm's runs together
        for name in ("demo/post-s0", "lone"):  # a sweep's run marks its arm: one mean curve
            await _highlight(pilot, pane, name)
            await pilot.press("space")
        chart = pane.query_one(OverlayChart)
        await wait_until(pilot, lambda: len(chart.labels) == 2, 10, "an arm and a run")
        assert chart.labels[0] == "model.norm=post (mean of 2)"
        table = pane.query_one(RunTable)
        marks = {key: cells[0].plain for key, cells in zip(table.keys, table.cells, strict=True)}
        assert marks["runs/demo/post-s1"] == "●" and marks["runs/demo/pre-s0"] == " "
        assert "model.norm=post (mean of 2)" in plain(pane.query_one("#runs-legend"))
        await _highlight(pilot, pane, "demo/post-s1")
        await pilot.press("space")  # any run of a marked arm unmarks the arm
        await wait_until(pilot, lambda: len(chart.labels) == 1, 10, "the arm unmarked")


def _row(name: str, **fields) -> RunRow:  # type: ignore[no-untyped-def]
    return RunRow(RunSummary(path=f"runs/{name}", name=name, status="finished", **fields))


def test_sort_keeps_missing_figures_last_and_filter_needs_every_word() -> None:
    rows = [_row("a", best_val_loss=2.0), _row("b"), _row("c", best_val_loss=1.0, preset="copy")]
    assert [r.summary.name for r in sort_rows(rows, "val")] == ["c", "a", "b"]
    assert [r.summary.name for r in sort_rows(rows, "val", reverse=True)] == ["a", "c", "b"]
    assert [r.summary.name for r in filter_rows(rows, "COPY c")] == ["c"]
    assert filter_rows(rows, "copy zzz") == []
    assert len(filter_rows(rows, "  ")) == 3


def test_cells() -> None:
    row = _row("a", step=30, total_steps=40, best_exact_match=0.5, tokens_per_s=12345.0)
    assert cell(row, "step") == "30/40" and cell(row, "exact") == "50.0%"
    assert (
        cell(row, "speed") == "12.3k"
        and cell(row, "val") == ""
        and cell(row, "label") == "(as preset)"
    )
    damaged = RunRow(RunSummary(path="x", name="x", status="damaged", detail="why"))
    assert cell(damaged, "label") == "why"


async def test_help_footer_and_palette_list_the_runs_keys() -> None:
    from tui_lab.ui.panes.runs.runs_pane import RunsPane

    write_run(ROOT / "a")
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        await runs_pane(pilot)
        sections = dict(app.help_sections())
        text = " ".join(f"{k} {v}" for k, v in sections["6 Runs"])
        for binding in RunsPane.BINDINGS:
            assert binding.description in text, binding.description
        commands = {c.title for c in app.get_system_commands(app.screen)}
        assert "Go to Runs" in commands and "Runs: Mark" in commands
        footer = plain(app.query_one("#keys"))
        assert "Mark" in footer and "Sort by" in footer


async def test_a_run_being_written_updates_live(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tui_lab.ui.panes.runs import runs_pane as runs_pane_module

    monkeypatch.setattr(runs_pane_module, "REFRESH_SECONDS", 0.2)
    run = write_run(ROOT / "live", steps=20, closing=None)  # no closing line, just written
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        assert pane.rows[0].summary.status == "running" and pane.rows[0].summary.step == 20
        with open(run / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"kind": "step", "step": 21, "loss": 0.5, "elapsed": 1.05}) + "\n")
        table = pane.query_one(RunTable)
        await wait_until(pilot, lambda: "21/" in table.row_text(0), 5, "the new step")


async def test_o_adds_a_folder_from_elsewhere(lab_folders: Path) -> None:
    write_run(ROOT / "here")
    write_run(lab_folders / "elsewhere" / "there", values={"model.norm": "post"})
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        await pilot.press("o")
        await pilot.pause()
        app.screen.query_one("#run-path").focus()
        await type_text(pilot, "elsewhere")
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(pane.rows) == 2, 10, "the added folder's run")
        assert sorted(r.summary.name for r in pane.rows) == ["elsewhere/there", "here"]
