"""The Runs pane mounted against a fake host: it needs the host protocol, not ``LabApp``."""

from __future__ import annotations

from pathlib import Path

from tests.data.make_pane_runs import write_pane_runs
from tests.ui.fake_host import FakeHost
from tests.ui.helpers import SIZE, wait_until
from tui_lab.ui.panes.runs.runs_pane import RunsPane


async def test_runs_pane_lists_and_sorts_runs_in_a_fake_host() -> None:
    root = Path("runs")
    write_pane_runs(root)
    host = FakeHost(lambda: RunsPane(root, id="runs-pane"), "runs", root)
    async with host.run_test(size=SIZE) as pilot:
        pane = host.query_one(RunsPane)
        await wait_until(pilot, lambda: bool(pane.shown), 20, "the runs read")
        assert host.registered == {"runs": pane}
        pane.focus_default()
        first = pane.sort_key
        await pilot.press("s")
        await wait_until(pilot, lambda: pane.sort_key != first, 5, "the next sort column")
