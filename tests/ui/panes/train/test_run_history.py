"""RunHistory: the Train pane's curves keep the newest points when a resumed run repeats steps."""

from __future__ import annotations

from tui_lab.ui.panes.train.run_history import RunHistory


def test_a_repeated_step_replaces_the_points_from_there_on() -> None:
    history = RunHistory()
    for step, loss in ((1, 3.0), (2, 2.0), (3, 1.5)):
        history.add_step(step, loss, lr=0.1)
    history.add_step(2, 2.5, lr=0.2)  # resumed from the checkpoint at step 1
    snap = history.snapshot()
    assert snap.steps == [1, 2]
    assert snap.loss == [3.0, 2.5]
    assert snap.lr == [0.1, 0.2]


def test_a_repeated_evaluation_replaces_the_later_ones() -> None:
    history = RunHistory()
    history.add_eval(10, 1.0, 0.5)
    history.add_eval(20, 0.8, 0.7)
    history.add_eval(10, 0.9, None)
    snap = history.snapshot()
    assert snap.eval_steps == [10]
    assert snap.val_loss == [0.9]
    assert snap.accuracy == [None]
