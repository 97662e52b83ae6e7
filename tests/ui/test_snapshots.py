"""Snapshot tests: one class per pane (and for help and a too-small terminal).

Review changes with the HTML report before accepting them with
``pytest tests/ui/test_snapshots.py --snapshot-update``. Everything shown is
deterministic: a seeded tiny run trained once per session on one thread,
timings frozen by the fixture, cursor blink off, toasts cleared.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from tests.ui.helpers import ready, set_field, settle, tiny_app, type_text, wait_until
from tui_lab.ui.panes.decode_pane import DecodePane
from tui_lab.ui.panes.train_pane import TrainPane

SIZE = (120, 40)


async def _opened(pilot) -> None:  # type: ignore[no-untyped-def]
    app = await ready(pilot)
    await wait_until(
        pilot, lambda: app.query_one(TrainPane).state == "ready", 30, "the run to load"
    )
    await wait_until(pilot, lambda: app.query_one(DecodePane).run is not None, 30)


async def _decoded(pilot, text: str = "31415") -> None:  # type: ignore[no-untyped-def]
    await _opened(pilot)
    await pilot.press("3")
    pilot.app.query_one("#decode-input", Input).value = ""
    await type_text(pilot, text)
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


class TestBuildScreen:
    def test_build(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await ready(pilot)
            await settle(pilot)

        assert snap_compare(tiny_app(), terminal_size=SIZE, run_before=run_before)

    def test_build_invalid_field(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await ready(pilot)
            await set_field(pilot, "model.d_model", "15")
            await settle(pilot)

        assert snap_compare(tiny_app(), terminal_size=SIZE, run_before=run_before)

    def test_build_80x24(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await ready(pilot)
            await settle(pilot)

        assert snap_compare(tiny_app(), terminal_size=(80, 24), run_before=run_before)


class TestTrainScreen:
    def test_train_idle(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await ready(pilot)
            await pilot.press("2")
            await settle(pilot)

        assert snap_compare(tiny_app(), terminal_size=SIZE, run_before=run_before)

    def test_train_opened_run(self, snap_compare, trained_run: Path) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await _opened(pilot)
            await pilot.press("2")
            await settle(pilot)

        assert snap_compare(
            tiny_app(run_dir=str(trained_run)), terminal_size=SIZE, run_before=run_before
        )


class TestDecodeScreen:
    def test_decode_result(self, snap_compare, trained_run: Path) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await _decoded(pilot)
            await settle(pilot)

        assert snap_compare(
            tiny_app(run_dir=str(trained_run)), terminal_size=SIZE, run_before=run_before
        )


class TestAttentionScreen:
    def test_attention_cross(self, snap_compare, trained_run: Path) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await _decoded(pilot)
            await pilot.press("4", "k", "k", "down", "right")
            await settle(pilot)

        assert snap_compare(
            tiny_app(run_dir=str(trained_run)), terminal_size=SIZE, run_before=run_before
        )

    def test_attention_overview_and_walkthrough(self, snap_compare, trained_run: Path) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await _decoded(pilot)
            await pilot.press("4", "w")
            pane = pilot.app.query_one("#attention-pane")
            await wait_until(pilot, lambda: pane.projections is not None, 30)
            await pilot.press("a")
            await settle(pilot)

        assert snap_compare(
            tiny_app(run_dir=str(trained_run)), terminal_size=SIZE, run_before=run_before
        )


class TestParamsScreen:
    def test_params(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await ready(pilot)
            await pilot.press("5")
            await settle(pilot)

        assert snap_compare(tiny_app(), terminal_size=SIZE, run_before=run_before)


class TestHelpScreen:
    def test_help(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await ready(pilot)
            await pilot.press("question_mark")
            await settle(pilot)

        assert snap_compare(tiny_app(), terminal_size=SIZE, run_before=run_before)


class TestTooSmall:
    def test_notice(self, snap_compare) -> None:  # type: ignore[no-untyped-def]
        async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
            await ready(pilot)
            await settle(pilot)

        assert snap_compare(tiny_app(), terminal_size=(60, 18), run_before=run_before)
