"""The Runs pane (6) lists a crosscoder as what it is: preset "crosscoder", what it was trained on in
the difference column, its figures and new/gone/shared counts under the table; it filters and sorts
like the other rows, a damaged one says why, and enter says how to open it (it is not a model)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.data.make_pane_runs import write_run
from tests.ui.helpers import SIZE, plain, runs_pane, tiny_app, type_text
from tui_lab.ui.panes.runs.run_rows import cell
from tui_lab.ui.widgets.run_table import RunTable

ROOT = Path("runs")
HISTORY_RUN = Path(__file__).resolve().parents[3] / "data" / "induction-mlp-run"


def _crosscoder(out: Path) -> None:
    from tui_lab.core.verbs.crosscoder_train import Request, run

    run(Request(out=str(out), run=str(HISTORY_RUN), steps=(100, 1200), d_sae=16, train_steps=20, batch=32,
                tokens=300))


async def test_a_crosscoder_row_filters_sorts_and_says_how_to_open_it() -> None:
    write_run(ROOT / "copy-pre")
    _crosscoder(ROOT / "crosscoders" / "xc-1")
    shutil.copytree(ROOT / "crosscoders" / "xc-1", ROOT / "crosscoders" / "xc-bad")
    (ROOT / "crosscoders" / "xc-bad" / "crosscoder_weights.safetensors").write_bytes(b"")
    last = [json.loads(ln) for ln in (ROOT / "crosscoders" / "xc-1" / "metrics.jsonl").read_text().splitlines()
            if json.loads(ln)["kind"] == "step"][-1]
    app = tiny_app(load_core=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await runs_pane(pilot)
        rows = {r.summary.name: r for r in pane.rows}
        row = rows["crosscoders/xc-1"]
        assert (row.summary.kind, row.summary.status) == ("crosscoder", "finished")
        assert cell(row, "preset") == "crosscoder" and cell(row, "step") == "20/20"
        assert "steps=100,1200" in cell(row, "label") and "d_sae=16" in cell(row, "label")
        bad = rows["crosscoders/xc-bad"].summary
        assert bad.status == "damaged" and "empty" in cell(rows["crosscoders/xc-bad"], "label")
        while pane.sort_key != "step":
            await pilot.press("s")
        steps = [r.summary.step for r in pane.shown]
        assert steps == sorted(steps) and len(steps) == 3
        pane.query_one(RunTable).move_to(row.key)
        await pilot.pause()
        detail = plain(pane.query_one("#runs-detail"))
        counts = f"new {row.summary.features_new} · gone {row.summary.features_gone} · shared {row.summary.features_shared}"
        assert f"EV {last['explained_variance']:.3f}" in detail and counts in detail
        app.clear_notifications()
        await pilot.press("enter")
        await pilot.pause()
        assert app.active_pane == "runs"
        notes = [str(n.message) for n in app._notifications]
        assert any(f"tfx-lab crosscoder features {row.key}" in n for n in notes)
        await pilot.press("slash")
        await type_text(pilot, "crosscoder finished")
        await pilot.pause()
        assert [r.summary.name for r in pane.shown] == ["crosscoders/xc-1"]
