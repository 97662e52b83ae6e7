"""The lab under a monkey: seeded random keys and resizes across every pane, training included.

The short CI version of ``scripts/monkey.py`` (run that for thousands of keys:
``python scripts/monkey.py --keys 10000 --seed 1``). It fails on an unhandled
exception, a key the lab does not process, or a lab that no longer answers
afterwards (dialogs close, pane keys switch, training stops).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.reliability.conftest import ROOT

CI_KEYS = 300
CI_SEED = 7


def load_monkey():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("tfx_monkey", ROOT / "scripts" / "monkey.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


async def test_monkey_short(in_tmp: Path) -> None:
    monkey = load_monkey()
    summary = await monkey.monkey(keys=CI_KEYS, seed=CI_SEED, workdir=in_tmp)
    report = summary.text()
    assert summary.keys == CI_KEYS, report
    assert not summary.exceptions, report
    assert not summary.hangs, report
    assert summary.responsive, report
    assert summary.training_starts >= 1, report  # the keys landed while a model trained
    assert len(summary.pane_visits) >= 5, report  # every pane it presses the key of (1-5) got keys
    assert summary.resizes >= 1, report


def test_monkey_stream_is_seeded() -> None:
    """The same seed gives the same keys (a failure can be replayed)."""
    import random

    monkey = load_monkey()
    rng1, rng2 = random.Random(3), random.Random(3)
    assert [monkey._choose(rng1) for _ in range(500)] == [monkey._choose(rng2) for _ in range(500)]
    assert "q" not in {monkey._choose(rng1) for _ in range(5000)}


async def test_page_keys_in_a_very_short_terminal(in_tmp: Path) -> None:
    from tests.ui.helpers import ready, tiny_app
    from tui_lab.ui.widgets.preset_list import PresetList

    app = tiny_app()
    async with app.run_test(size=(138, 40)) as pilot:
        await ready(pilot)
        assert isinstance(app.focused, PresetList)
        await pilot.press("down")  # a preset is highlighted
        await pilot.resize_terminal(138, 6)
        await pilot.pause(0.1)
        await pilot.press("pagedown")  # pageup: the same
        assert not app._exit


async def test_a_crash_while_training_stops_the_training_thread(in_tmp: Path) -> None:
    from tests.ui.helpers import SIZE, ready, tiny_app, train_endless

    app = tiny_app()
    pane = None
    try:
        with pytest.raises(RuntimeError, match="any unhandled exception"):
            async with app.run_test(size=SIZE) as pilot:
                await ready(pilot)
                pane = await train_endless(pilot)
                await pilot.press("space")  # paused

                def boom() -> None:
                    raise RuntimeError("any unhandled exception in the lab")

                app.call_later(boom)
                await pilot.pause(0.5)
        assert pane is not None
        assert pane.loop_finished.wait(5), "the lab died but its training thread runs on"
    finally:
        if pane is not None:  # never leave the thread behind: it would keep pytest from exiting
            pane.stop_training()
            pane.loop_finished.wait(30)


# Found by `scripts/monkey.py --seed 1` (key 2956): plotext's build applies
# yscale("log") to the stored data in place, so the rebuild after a resize took
# log10 of log10(loss) and raised ValueError/IndexError. Losses under 1 are the
# case that broke (log of a negative number).
async def test_log_scale_loss_chart_survives_a_resize(in_tmp: Path, run_dir: Path) -> None:
    from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
    from tui_lab.ui.panes.train.train_pane import TrainPane

    app = tiny_app(run_dir=str(run_dir))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.query_one(TrainPane)
        await wait_until(pilot, lambda: pane.state == "ready" and len(pane.history) > 0, 30, "the run")
        await pilot.press("2", "l")
        await pilot.pause(0.4)  # drawn once, on log scale
        assert pane.log_scale
        for size in ((100, 30), (120, 40), (90, 28)):  # every resize rebuilds the figure
            await pilot.resize_terminal(*size)
            await pilot.pause(0.3)
        assert not app._exit
        assert "log scale" in str(app.query_one("#loss-chart").render())


# Found by `scripts/monkey.py --keys 10000 --seed 1` (key 10): page down in the
# command palette before its list was laid out raised KeyError in Textual's
# OptionList._move_page and killed the lab (guarded for every list, ui/compat.py).
async def test_page_keys_in_the_command_palette_without_room(in_tmp: Path) -> None:
    from tests.ui.helpers import SIZE, ready, tiny_app

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.resize_terminal(60, 4)
        await pilot.pause(0.1)
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert not app._exit


# Found by `scripts/monkey.py --keys 10000 --seed 2`: space pressed again right as
# a run ended started a new one while the old worker was still returning; its
# late "loop finished" made s ignore the new run (state running forever).
async def test_a_stale_worker_cannot_make_stop_ignore_the_next_run(in_tmp: Path) -> None:
    from tests.ui.helpers import SIZE, ready, tiny_app, train_endless, wait_until

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await train_endless(pilot, steps=2)
        old_worker_done = pane.loop_finished
        await pilot.press("s")
        await wait_until(pilot, lambda: pane.state == "done", 30, "the first run to stop")
        await pilot.press("r", "space")  # a fresh run
        await wait_until(pilot, lambda: pane.state == "running" and len(pane.history) >= 2, 60, "steps")
        old_worker_done.set()  # the first run's worker returning late
        await pilot.press("s")
        await wait_until(pilot, lambda: pane.state == "done", 30, "the second run to stop after s")
