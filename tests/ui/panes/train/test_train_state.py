"""The Train pane's state, reading run folders and the driver's generations, without an app."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from tui_lab.core.runs.events import DoneEvent, EvalEvent, StepEvent
from tui_lab.ui.panes.train.run_follow import RunFollower, events_of, latest, resting_step
from tui_lab.ui.panes.train.train_state import Phase, TrainState

ROOT = Path(__file__).resolve().parents[4]


def test_state_and_run_folder_modules_import_no_textual_and_no_torch() -> None:
    code = (
        "import sys; import tui_lab.ui.panes.train.train_state, tui_lab.ui.panes.train.run_follow, "
        "tui_lab.ui.panes.train.train_view; "
        "print(sorted(m for m in ('textual', 'torch', 'rich') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def running() -> TrainState:
    state = TrainState()
    assert state.core_loaded() and state.build() and state.built(wait=False)
    return state


def test_a_run_from_loading_to_done() -> None:
    state = TrainState()
    assert state.phase is Phase.LOADING and state.phase == "loading"  # a str for old readers
    assert not state.build()  # nothing is built before torch is in
    assert state.core_loaded() and state.phase is Phase.IDLE
    assert not state.core_loaded()  # once only
    assert state.build() and state.phase is Phase.BUILDING and state.active
    assert state.built(wait=False) and state.phase is Phase.RUNNING
    assert state.status_word == "training" and state.hint == "space pause · s stop"
    assert state.hint_with({"toggle": "t", "stop": "x", "reset": "r"}) == "t pause · x stop"
    assert state.finish("finished") and state.phase is Phase.DONE
    assert state.reason == "finished" and not state.active and not state.resumable


def test_pause_and_resume_only_where_they_make_sense() -> None:
    state = TrainState(Phase.IDLE)
    assert not state.pause() and not state.resume() and state.phase is Phase.IDLE
    state = running()
    assert not state.resume()  # not paused
    assert state.pause() and state.phase is Phase.PAUSED and state.status_word == "paused"
    assert not state.pause()  # twice: refused, still paused
    assert state.resume() and state.phase is Phase.RUNNING
    assert state.offers("pause") and not state.offers("resume") and not state.offers("start")


def test_stop_goes_through_stopping_to_done_with_the_reason() -> None:
    state = running()
    assert state.pause() and state.stop(loop_live=True) and state.phase is Phase.STOPPING
    assert state.status_word == "stopping" and state.active
    assert not state.stop(loop_live=True)  # already stopping
    assert state.offers("reset") is None and state.offers("stop") is None  # shown, greyed
    assert state.finish("stopped") and state.phase is Phase.DONE
    assert state.resumable and state.offers("start") and not state.can_stop


def test_stop_during_a_build_with_no_loop_yet_goes_back_to_idle() -> None:
    state = TrainState(Phase.IDLE)
    assert state.build() and state.stop(loop_live=False) and state.phase is Phase.IDLE
    assert not state.built(wait=False)  # the run that arrives late does not start training
    assert not TrainState(Phase.IDLE).stop(loop_live=False)


def test_an_opened_run_waits_then_starts() -> None:
    state = TrainState(Phase.IDLE)
    assert not state.start()  # nothing built to start
    assert state.build() and state.built(wait=True) and state.phase is Phase.READY
    assert state.can_open and state.offers("start")
    assert state.start() and state.phase is Phase.RUNNING and not state.can_open


def test_failures() -> None:
    state = TrainState(Phase.IDLE)
    assert state.build() and state.build_failed(has_run=False) and state.phase is Phase.IDLE
    assert not state.build_failed(has_run=False)  # only while building
    state = running()
    assert state.finish("stopped") and state.build()  # continue it from its checkpoint...
    assert state.build_failed(has_run=True)  # ...which failed: the run shown ended as before
    assert state.phase is Phase.DONE and state.reason == "stopped"
    state = running()
    assert state.crash(has_run=True) and state.phase is Phase.DONE and state.reason == "error"
    assert state.resumable  # from the last checkpoint
    state = TrainState(Phase.BUILDING)
    assert state.crash(has_run=False) and state.phase is Phase.IDLE
    assert running().finish("nan") and not TrainState().finish("nan")  # loading: no run


def test_reset_and_follow() -> None:
    state = running()
    assert state.pause() and state.reset(core_loaded=True)
    assert (state.phase, state.reason) == (Phase.IDLE, "")
    assert not running().follow()  # not over a live run
    state = TrainState()
    assert state.follow() and state.phase is Phase.FOLLOWING
    assert not state.core_loaded() and not state.build() and not state.reset(core_loaded=True)
    assert not state.finish("finished") and not state.can_open
    assert state.offers("start") is False and state.offers("reset") is None
    assert TrainState(Phase.DONE).reset(core_loaded=False)  # torch not in: back to loading


# ---- run folders read back as events ------------------------------------------------


def step(n: int, loss: float = 1.0) -> dict:
    return {"kind": "step", "step": n, "total_steps": 10, "loss": loss, "lr": 0.001,
            "grad_norm": 0.5, "tokens_per_s": 100.0, "elapsed": n * 0.1, "eta": 1.0}


def evaluation(n: int) -> dict:
    return {"kind": "eval", "step": n, "val_loss": 0.5, "exact_match": 0.25, "n": 8,
            "overlap": 0}


def test_events_of_and_latest_skip_what_stands_for_no_event() -> None:
    records = [step(1), evaluation(1), {"kind": "step"}, step(2, loss=math.nan), {"x": 1}]
    events = events_of(records)
    assert [type(e) for e in events] == [StepEvent, EvalEvent, StepEvent]
    last_step, last_eval = latest(events)
    assert last_step is events[2] and last_eval is events[1]
    assert latest([]) == (None, None)


def test_a_restored_runs_last_step_shows_the_folders_step_and_no_live_figures() -> None:
    last = events_of([step(9)])[0]
    shown = resting_step(last, step=8, total_steps=10, elapsed=3.0)
    assert (shown.step, shown.loss, shown.lr, shown.elapsed) == (8, 1.0, 0.001, 3.0)
    assert math.isnan(shown.grad_norm) and shown.tokens_per_s == 0.0 and shown.eta is None


def test_the_follower_reports_only_news() -> None:
    written: list = [step(1)]
    calls = {"fail": False}

    def read(path: Path) -> list:
        if calls["fail"]:
            raise OSError("half written")
        return list(written)

    follower = RunFollower(Path("run"), read)
    assert [e.step for e in follower.poll()] == [1]
    assert follower.poll() is None  # nothing new
    written.append(step(2, loss=math.nan))  # a NaN figure is still news once, then not
    assert [e.step for e in follower.poll()] == [1, 2]
    assert follower.poll() is None
    calls["fail"] = True
    assert follower.poll() is None  # a read error: try again next time
    calls["fail"] = False
    written.append(evaluation(2))
    assert len(follower.poll()) == 3


# ---- the driver drops what a reset run still reports ----------------------------------


def test_events_of_a_forgotten_generation_are_dropped() -> None:
    from tui_lab.ui.panes.train.run_history import RunHistory
    from tui_lab.ui.panes.train.train_workers import RunDriver

    posted: list = []
    history = RunHistory()
    driver = RunDriver(posted.append, history, Path("runs"))
    old = driver.on_event_for(driver.generation)
    old(events_of([step(1)])[0])
    assert len(history) == 1 and driver.newest_step is not None
    driver.forget()  # reset: a new generation, no live run
    assert driver.newest_step is None and not driver.loop_live
    old(events_of([step(2)])[0])
    old(DoneEvent("stopped", "stopped at step 2", 2))
    assert len(history) == 1 and posted == []
    driver.on_event_for(driver.generation)(DoneEvent("finished", "done", 3))
    assert [type(m) for m in posted] == [RunDriver.Done]


@pytest.mark.parametrize("action", ["start", "pause", "resume", "stop", "reset", "open_run"])
def test_every_train_binding_is_offered_somewhere(action: str) -> None:
    from tui_lab.ui.panes.train.train_pane import TrainPane

    assert action in {b.action for b in TrainPane.BINDINGS}
    assert any(TrainState(phase).offers(action) for phase in Phase)
