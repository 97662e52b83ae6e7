"""Time travel (``[`` ``]`` ``{`` ``}`` ``p``) through a run's history, and the head atlas."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Input

from tests.conftest import tiny_config
from tests.ui.conftest import private_copy
from tests.ui.helpers import RUN_RESTORE_S, ready, tiny_app, type_text, wait_until
from tui_lab.ui.panes.attention.attention_pane import AttentionPane
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.panes.train.train_pane import TrainPane
from tui_lab.ui.state.travel import TimeTravel, sparkline, value_at
from tui_lab.ui.widgets.head_atlas import HeadAtlas, bar
from tui_lab.ui.widgets.snapshot_strip import SnapshotStrip

# ---- the state, without Textual -----------------------------------------------------


def test_moves_through_the_snapshots_and_back_to_latest() -> None:
    state = TimeTravel()
    state.set_run(Path("r"), [1, 2, 4, 8])
    assert state.index is None and state.step is None
    assert state.target("prev") == 3  # from latest, [ is the last snapshot
    assert state.target("next") is None  # ] on latest stays there
    state.index = 0
    assert state.target("prev") == 0
    assert state.target("next") == 1
    assert state.target("first") == 0 and state.target("last") == 3
    state.index = 3
    assert state.target("next") is None  # ] past the last: the live model again
    with pytest.raises(ValueError):
        state.target("sideways")


def test_describe_play_and_another_run() -> None:
    state = TimeTravel()
    state.set_run(Path("r"), [1, 2, 256])
    assert state.describe(2000) == "latest · 3 snapshots"
    state.index = 2
    assert state.describe(2000) == "step 256 of 2,000 · snapshot 3/3"
    assert state.play_start() == 0  # at the end: playing starts over
    state.index, state.playing = 1, True
    assert state.play_next() == 2
    state.index = 2
    assert state.play_next() is None and not state.playing
    state.set_run(Path("other"), [5])
    assert state.index is None  # another folder: back to latest
    assert TimeTravel().describe(None) == "latest"


def test_sparkline_bar_and_value_at() -> None:
    assert sparkline([], 10) == ""
    line = sparkline([3.0, 2.0, 1.0, 0.0], 4)
    assert line[0] == "█" and line[-1] == "▁" and len(line) == 4
    assert len(sparkline(list(range(100)), 20)) == 20
    assert sparkline(list(range(100)), 20)[-1] == "█"  # the last value is always drawn
    assert sparkline([0.0, 0.0, 1.0], 24, 0.0, 1.0) == "▁▁█"  # fewer values than width: all
    assert sparkline([0.5], 5, 0.0, 1.0) in ("▄", "▅")
    assert bar(1.0, 4) == "████" and bar(0.0, 4).strip() == ""
    assert value_at([10, 20, 30], [0.1, 0.2, 0.3], 25) == (20, 0.2)
    assert value_at([10], [0.1], 5) is None


# ---- in the lab --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def history_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny copy run trained here (a few seconds) with its history snapshots."""
    from tui_lab.core.runs.snapshots import list_snapshots
    from tui_lab.core.training.train import TrainingRun

    out = tmp_path_factory.mktemp("history") / "hist-run"
    TrainingRun(tiny_config(), out).run()
    assert len(list_snapshots(out)) >= 4
    return out


@pytest.fixture
def history_run(history_source: Path, lab_folders: Path) -> Path:
    """A private copy of the history run under the test's ``runs/``."""
    return private_copy(history_source, lab_folders)


async def _decode(pilot, text: str = "3141") -> None:  # type: ignore[no-untyped-def]
    app = await ready(pilot)
    await wait_until(pilot, lambda: app.query_one(TrainPane).state == "ready", RUN_RESTORE_S, "the run")
    await wait_until(pilot, lambda: app.query_one(DecodePane).run is not None, 30)
    await pilot.press("3")
    app.query_one("#decode-input", Input).value = ""
    await type_text(pilot, text)
    await pilot.press("enter")
    await wait_until(pilot, lambda: app.last_decode is not None, 30, "the decode")
    await pilot.press("4")
    await wait_until(pilot, lambda: app.query_one(AttentionPane).result is not None, 10)


async def test_keys_step_through_the_history_and_play_to_the_end(history_run: Path) -> None:
    from tui_lab.core.runs.snapshots import list_snapshots

    steps = list_snapshots(history_run)
    app = tiny_app(run_dir=str(history_run))
    async with app.run_test(size=(120, 40)) as pilot:
        await _decode(pilot)
        pane = app.query_one(AttentionPane)
        state = app.travel.state

        async def press(key: str, index: int | None) -> object:
            await pilot.press(key)
            await wait_until(
                pilot,
                lambda: state.index == index and pane.result is app.travel.shown_result,
                30,
                f"{key} to show snapshot {index}",
            )
            await pilot.pause()
            return pane.result

        first = await press("left_curly_bracket", 0)
        strip = pane.query_one(SnapshotStrip)
        assert strip.display
        assert f"snapshot 1/{len(steps)}" in str(strip.render())
        assert f"step {steps[0]} of " in str(strip.render())
        last = await press("right_curly_bracket", len(steps) - 1)
        name = pane.capture_name
        # Step 1's weights and the last snapshot's give another heatmap (not exact values).
        assert (first.attention[name] - last.attention[name]).abs().max() > 1e-4
        assert pane.query_one(SnapshotStrip).display
        await press("left_square_bracket", len(steps) - 2)
        await press("right_square_bracket", len(steps) - 1)
        # Decode shows the same snapshot's output, with its own strip.
        decode_strip = app.query_one(DecodePane).query_one(SnapshotStrip)
        assert f"snapshot {len(steps)}/{len(steps)}" in str(decode_strip.render())
        await pilot.press("right_square_bracket")  # past the last: the live model
        await wait_until(pilot, lambda: state.index is None, 30, "latest")
        await pilot.pause()
        assert "latest" in str(strip.render())
        # p plays from the first snapshot to the last, then stops.
        await pilot.press("p")
        await wait_until(pilot, lambda: state.playing, 5, "playing to start")
        await wait_until(
            pilot,
            lambda: (
                not state.playing
                and state.index == len(steps) - 1
                and pane.result is app.travel.shown_result
            ),
            60,
            "the end",
        )
        # A head switched off in Attention stays off when stepping through the history.
        await pilot.press("x")
        decode = app.query_one(DecodePane)
        await wait_until(pilot, lambda: decode.ablation.heads, 10, "a head switched off")
        before = await press("left_curly_bracket", 0)
        assert decode.ablation.label_of(before), "the snapshot's decode is not marked ablated"


async def test_atlas_labels_every_head_with_a_pattern(history_run: Path) -> None:
    app = tiny_app(run_dir=str(history_run))
    async with app.run_test(size=(120, 40)) as pilot:
        await _decode(pilot)
        await pilot.press("a")
        atlas = app.query_one(HeadAtlas)
        await wait_until(pilot, lambda: atlas.heads is not None, 30, "the scores")
        await wait_until(pilot, lambda: atlas.curves is not None and atlas.progress is None, 60)
        await pilot.pause()
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(atlas.content)
        lines = console.export_text().splitlines()
        heads = atlas.heads
        assert len(heads) == 6  # encoder self, decoder self, cross; 2 heads each
        assert [h.best_score for h in heads] == sorted((h.best_score for h in heads), reverse=True)
        for h in heads:  # one line per head: its label, pattern (or none clear), score and curve
            (line,) = [line for line in lines if h.label in line.split()]
            assert f"{h.best_score:.2f}" in line
            if h.pattern is None:  # below the floor: not given the nearest pattern's name
                assert "no clear pattern" in line and h.best not in line
            else:
                assert h.pattern == h.best and h.best in line
            assert any(ch in line for ch in "▁▂▃▄▅▆▇█")
            assert 0.0 <= h.best_score <= 1.0
        curves = atlas.curves
        assert len(curves.steps) >= 4
        assert len(curves.curve(heads[0].label, heads[0].best)) == len(curves.steps)
        # Which probe the scores were taken on, and the floor, are said under the table.
        assert any(line.strip().startswith("probe task (diagonal, previous, first, alignment)") for line in lines)
        assert any("label floor: lift over chance ≥ 0.30" in line for line in lines), lines
        # The curves' x axis is said: how many snapshots, from which step to which.
        caption = f"at the run's {len(curves.steps)} snapshots, step {curves.steps[0]:,} to {curves.steps[-1]:,}"
        assert any(caption in line for line in lines), lines


async def test_a_run_without_history_says_so(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=(120, 40)) as pilot:
        await _decode(pilot)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert "this run has no history snapshots" in messages
        assert not app.query_one(AttentionPane).query_one(SnapshotStrip).display
