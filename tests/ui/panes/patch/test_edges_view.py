"""The Patch pane's edges view by keyboard: g scores every edge of the induction run's pair
(the list and the faithfulness curve are the circuit verb's), k checks the known circuit,
escape cancels, a run with history gets the final circuit's curve over its snapshots, and
the two keys are in the pane's help without clashing with its other keys."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.ui.helpers import SIZE, wait_until
from tests.ui.panes.patch.conftest import INDUCTION_RUN, PatchHost, in_hand
from tui_lab.ui import key_bindings, pane_registry
from tui_lab.ui.panes.patch.edges_widget import CurveChart, EdgesPanel
from tui_lab.ui.panes.patch.patch_pane import PatchPane


def _host(run_dir: Path, tmp_path: Path) -> tuple[PatchHost, PatchPane]:
    pane = PatchPane(id="patch-pane")
    return PatchHost(pane, tmp_path / "runs", in_hand(run_dir)), pane


async def _settled(pilot: Pilot, edges: EdgesPanel, key: str) -> None:
    await pilot.press(key)
    await wait_until(pilot, lambda: not edges.running, 120, f"edges after {key}")
    await pilot.pause()


def _reference(run_dir: Path) -> object:
    from tui_lab.core.analysis.patching.patch_pair import ready_pair
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.verbs.circuit import Request, run_on

    lab = open_model(run_dir)
    return run_on(Request(), lab, ready_pair(lab, "induction-key"))  # the edges' default on an induction run


async def test_g_scores_the_edges_and_k_checks_the_known_circuit(tmp_path: Path) -> None:
    host, pane = _host(INDUCTION_RUN, tmp_path)
    want = _reference(INDUCTION_RUN)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        edges = host.query_one(EdgesPanel)
        assert not edges.display
        await _settled(pilot, edges, "g")
        assert edges.display and pane.view.view == "edges"
        got = edges.view.result
        assert got is not None
        assert [e.name for e in got.scores.top(5)] == [e.name for e in want.scores.top(5)]  # type: ignore[attr-defined]
        listed = str(host.query_one("#edges-list").render())
        assert "Top 20 of 81 edges" in listed and want.scores.top(1)[0].name in listed  # type: ignore[attr-defined]
        chart = host.query_one("#edges-curve", CurveChart)
        assert chart._data is not None and chart._data[3] == pytest.approx(want.faithful.recovered, abs=1e-5)  # type: ignore[attr-defined]
        assert "CPR" in str(host.query_one("#edges-summary").render())
        assert "no history snapshots" in str(host.query_one("#edges-status").render())
        await _settled(pilot, edges, "k")
        assert edges.view.check is not None and edges.view.check.found
        assert "known circuit found" in str(host.query_one("#edges-summary").render())
        await pilot.press("g")  # back to the heatmap
        assert pane.view.view == "map" and not edges.display


async def test_k_first_scores_then_checks(tmp_path: Path) -> None:
    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        edges = host.query_one(EdgesPanel)
        await _settled(pilot, edges, "k")  # scores, then checks
        assert edges.view.result is not None and edges.view.check is not None
        assert pane.view.view == "edges"


async def test_escape_cancels_the_job_under_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui_lab.ui.panes.patch import edges_workers

    stopped = threading.Event()

    def slow(*_args: object) -> None:  # a job that runs until its worker is cancelled
        while not edges_workers._cancelled():
            time.sleep(0.01)
        stopped.set()

    monkeypatch.setattr(edges_workers, "score", slow)
    host, pane = _host(INDUCTION_RUN, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        edges = host.query_one(EdgesPanel)
        await pilot.press("g")
        await pilot.pause()
        assert edges.running and "escape cancels" in str(host.query_one("#edges-status").render())
        await pilot.press("escape")
        await wait_until(pilot, stopped.is_set, 10, "the job to see its cancellation")
        assert not edges.running and "cancelled" in str(host.query_one("#edges-status").render())
        assert edges.view.result is None


async def test_a_run_with_history_gets_the_final_circuit_over_its_snapshots(tmp_path: Path,
                                                                             history_run: Path) -> None:
    host, pane = _host(history_run, tmp_path)
    async with host.run_test(size=SIZE) as pilot:
        pane.focus_default()
        edges = host.query_one(EdgesPanel)
        await _settled(pilot, edges, "g")
        history = edges.view.history
        assert history is not None, str(host.query_one("#edges-status").render())
        assert history.steps == [4, 8, 12]
        chart = host.query_one("#edges-history", CurveChart)
        assert chart._data is not None and chart._data[2] == [4.0, 8.0, 12.0]


def test_the_keys_are_in_help_and_clash_with_nothing_in_the_pane() -> None:
    patch = pane_registry.spec("patch")
    ours = {"patch.edges": "g", "patch.known_circuit": "k"}
    for group in pane_registry.SCOPES[patch.title]:  # the app's keys, the pane's, its widgets'
        for binding in group:
            keys = binding.key.split(",")  # type: ignore[union-attr]
            if binding.id in ours:  # type: ignore[union-attr]
                assert keys == [ours[binding.id]]  # type: ignore[union-attr]
            else:
                assert not {"g", "k"} & set(keys), binding
    described = {b.id: b.description for b in patch.bindings}  # type: ignore[union-attr]
    assert described["patch.edges"] == "Edges" and described["patch.known_circuit"] == "Known circuit check"
    assert PatchPane.BINDINGS is key_bindings.PATCH  # the help screen reads these
