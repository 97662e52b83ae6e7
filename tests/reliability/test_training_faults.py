"""Training faults: NaN/inf loss, exploding gradients, a device that disappears.

Each ends the run with a reason and a one-line message, keeps the last good
checkpoint byte for byte, and leaves a loadable run folder with the story in
log.txt. tests/core/test_train.py covers one NaN (lr 1e30 on a resumed run);
here the fault is injected at a chosen step of a run that saves every step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.reliability.conftest import (
    assert_printable,
    assert_timestamped,
    cli,
    log_lines,
    snapshot,
    state,
    temps,
    tiny,
)
from tui_lab.core.model.models import EncoderDecoder
from tui_lab.core.runs.folder import load_run
from tui_lab.core.training.train import (
    CheckpointEvent,
    DoneEvent,
    EvalEvent,
    LogEvent,
    StepEvent,
    TrainingRun,
)

FAULT_STEP = 6  # the fault strikes during this (1-based) training step


class _Scale(torch.autograd.Function):
    """Identity forward; multiplies the gradient by ``factor`` on the way back."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.factor, None


def inject(monkeypatch: pytest.MonkeyPatch, fault: str, at_step: int = FAULT_STEP, *,
           during: str = "train") -> dict:
    """Patch EncoderDecoder.forward so ``fault`` happens from training step ``at_step`` on.

    ``during="eval"`` strikes in evaluation forwards instead (model.eval()).
    """
    real = EncoderDecoder.forward
    calls = {"train": 0}

    def forward(self: EncoderDecoder, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.training:
            calls["train"] += 1
        live = calls["train"] >= at_step and (self.training if during == "train" else not self.training)
        logits = real(self, *args, **kwargs)
        if not live:
            return logits
        if fault == "nan":
            return logits * float("nan")
        if fault == "inf":
            return logits + float("inf")
        if fault == "explode":  # finite loss, gradients beyond float32
            return _Scale.apply(logits, 1e38)
        if fault == "steep":  # finite loss, gradients a million times too large
            return _Scale.apply(logits, 1e6)
        if fault == "cuda":
            raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                               "CUDA kernel errors might be asynchronously reported at some other API call")
        if fault == "oom":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        raise AssertionError(fault)

    monkeypatch.setattr(EncoderDecoder, "forward", forward)
    return calls


def run_with_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, **kw: Any):  # type: ignore[no-untyped-def]
    """Train a tiny run that checkpoints after every step; the fault strikes at FAULT_STEP."""
    out = tmp_path / "run"
    events: list = []
    saved: dict[int, dict[str, bytes]] = {}

    def on_event(event: object) -> None:
        events.append(event)
        if isinstance(event, CheckpointEvent):
            saved[event.step] = snapshot(out)

    config = tiny(train={"steps": 40, "checkpoint_seconds": 1e-9, "eval_every": 4, **kw.pop("train", {})})
    run = TrainingRun(config, out, on_event=on_event)
    inject(monkeypatch, fault, **kw)
    summary = run.run()
    monkeypatch.undo()
    return out, events, saved, summary


def check_stopped_cleanly(out: Path, events: list, saved: dict, summary: dict, reason: str,
                          *fragments: str, capsys: pytest.CaptureFixture[str]) -> DoneEvent:
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == reason, done
    assert summary["reason"] == reason and summary["message"] == done.message
    assert "\n" not in done.message
    assert_printable(done.message)
    for fragment in fragments:
        assert fragment in done.message, (fragment, done.message)
    # The last good checkpoint is the last one saved, byte for byte, and it loads.
    last = max(saved)
    assert done.step - 1 <= last <= done.step  # nothing was lost but the step that failed
    assert snapshot(out) == saved[last]
    assert state(out)["step"] == last
    assert temps(out) == []
    result = cli(capsys, "eval", "--run", out, "--n", "8", "--json")
    assert result.rc == 0, result.err
    reopened = cli(capsys, "decode", "--run", out, "--input", "123", "--json")
    assert reopened.rc == 0, reopened.err
    # log.txt says what happened, and when.
    lines = log_lines(out)
    assert_timestamped(lines)
    assert lines[-1].endswith(done.message)
    assert [e for e in events if isinstance(e, LogEvent) and e.level == "error"][-1].message == done.message
    return done


@pytest.mark.parametrize("fault, what", [("nan", "loss became nan"), ("inf", "loss became")])
def test_nan_or_inf_loss_stops_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fault: str, what: str,
) -> None:
    out, events, saved, summary = run_with_fault(tmp_path, monkeypatch, fault)
    check_stopped_cleanly(out, events, saved, summary, "nan", what, f"at step {FAULT_STEP}",
                          "the last good checkpoint is kept", "lower train.lr", capsys=capsys)
    assert max(e.step for e in events if isinstance(e, StepEvent)) == FAULT_STEP - 1


@pytest.mark.parametrize("clip", [1.0, 0.0])
def test_gradients_beyond_float32_stop_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], clip: float,
) -> None:
    out, events, saved, summary = run_with_fault(tmp_path, monkeypatch, "explode", train={"clip": clip})
    check_stopped_cleanly(out, events, saved, summary, "nan", "gradient norm became inf",
                          f"at step {FAULT_STEP}", capsys=capsys)


def test_steep_gradients_are_clipped_and_training_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Large but finite gradients: clipping keeps the update sane; the norm shows in the metrics."""
    out, events, _saved, summary = run_with_fault(tmp_path, monkeypatch, "steep", train={"steps": 12})
    assert summary["reason"] == "finished", summary
    norms = [e.grad_norm for e in events if isinstance(e, StepEvent)]
    assert max(norms[FAULT_STEP - 1:]) > 1e4 * max(norms[: FAULT_STEP - 1])  # visible to the user
    assert all(math.isfinite(e.loss) for e in events if isinstance(e, StepEvent))
    from tui_lab.core.training.train import open_run

    reopened = open_run(out, device="cpu")
    assert all(torch.isfinite(p).all() for p in reopened.model.parameters())


def test_weights_that_overflow_are_never_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A finite loss whose update overflows the weights: the save refuses them (bug found and fixed).

    Before, the step's loss was finite so the periodic save wrote inf weights over the
    last good checkpoint, and the next step stopped 'keeping' that broken one.
    """
    out = tmp_path / "run"
    events: list = []
    saved: dict[int, dict[str, bytes]] = {}
    config = tiny(train={"steps": 40, "checkpoint_seconds": 1e-9, "clip": 0.0, "warmup_steps": 0,
                         "schedule": "constant", "lr": 1e-3})
    run = TrainingRun(config, out, on_event=events.append)
    from tui_lab.core.training import train as train_module

    real_set_lr = train_module.set_lr

    def set_lr(optimizer: torch.optim.Optimizer, step: int, train: object, elapsed: float = 0.0) -> float:
        rate = real_set_lr(optimizer, step, train, elapsed)
        if step == FAULT_STEP:  # this update overflows float32
            for group in optimizer.param_groups:
                group["lr"] = 1e39
        return rate

    def on_event(event: object) -> None:
        events.append(event)
        if isinstance(event, CheckpointEvent):
            saved[event.step] = snapshot(out)

    monkeypatch.setattr(train_module, "set_lr", set_lr)
    run.on_event = on_event
    summary = run.run()
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "nan", done
    assert "weights became inf/nan by step" in done.message and "not saved" in done.message, done.message
    last = max(saved)
    assert snapshot(out) == saved[last]
    from tui_lab.core.training.train import open_run

    reopened = open_run(out, device="cpu")
    assert all(torch.isfinite(p).all() for p in reopened.model.parameters())
    assert summary["reason"] == "nan"


@pytest.mark.parametrize("fault, fragment", [
    ("cuda", "CUDA error: an illegal memory access was encountered"),
    ("oom", "CUDA out of memory"),
])
def test_device_error_ends_the_run_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fault: str, fragment: str,
) -> None:
    out, events, saved, summary = run_with_fault(tmp_path, monkeypatch, fault)
    done = check_stopped_cleanly(out, events, saved, summary, "error", fragment,
                                 f"training failed at step {FAULT_STEP - 1}", capsys=capsys)
    assert "asynchronously" not in done.message  # the first line only


def test_device_error_during_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    out, events, saved, summary = run_with_fault(tmp_path, monkeypatch, "cuda", during="eval")
    check_stopped_cleanly(out, events, saved, summary, "error", "CUDA error", capsys=capsys)


def test_device_error_in_the_closing_evaluation_does_not_escape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The time limit ends the run, then the device fails in the closing evaluation
    (bug found and fixed: it raised out of run())."""
    out = tmp_path / "run"
    events: list = []
    run = TrainingRun(tiny(train={"steps": 40, "eval_every": 1000, "max_seconds": 1e-9}), out,
                      on_event=events.append)
    inject(monkeypatch, "cuda", at_step=0, during="eval")
    summary = run.run()  # must return
    assert summary["reason"] == "error" and "CUDA error" in summary["message"]
    assert isinstance(events[-1], DoneEvent) and events[-1].reason == "error"
    monkeypatch.undo()
    assert cli(capsys, "eval", "--run", out, "--n", "8").rc == 0


def test_a_stop_saves_without_the_closing_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Quitting must not wait for hundreds of greedy decodes: a stop saves at once."""
    out = tmp_path / "run"
    events: list = []
    run = TrainingRun(tiny(train={"steps": 40, "eval_every": 1000}), out)
    evaluations = inject(monkeypatch, "cuda", at_step=0, during="eval")  # any evaluation would fail

    def on_event(event: object) -> None:
        events.append(event)
        if isinstance(event, StepEvent) and event.step == 3:
            run.stop()

    run.on_event = on_event
    summary = run.run()
    assert summary["reason"] == "stopped", summary
    assert not any(isinstance(e, EvalEvent) for e in events)
    assert load_run(out).state["step"] == 3
    assert evaluations["train"] == 3


def test_cli_train_with_a_device_error_exits_1_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    preset = tmp_path / "tiny.yaml"
    preset.write_text(tiny(train={"steps": 40}).to_yaml())
    inject(monkeypatch, "cuda")
    result = cli(capsys, "train", "--preset", preset, "--out", tmp_path / "run", "--json")
    assert result.rc == 1 and "Traceback" not in result.err
    assert result.err.strip() == f"error: training failed at step {FAULT_STEP - 1}: CUDA error: " \
                                 "an illegal memory access was encountered"


# --------------------------------------------------------------------------- in the lab


async def _lab_run_ends(pilot, app, fault: str):  # type: ignore[no-untyped-def]
    """Start a run in the lab and make ``fault`` end it in the training process."""
    from tests.ui.helpers import train_endless, wait_until
    from tui_lab.ui.panes.train.train_pane import TrainPane

    pane = app.query_one(TrainPane)
    if fault == "nan":  # a learning rate this size overflows the weights within two steps
        pane.config_changed(app.config.with_values(
            {"train.lr": 1e30, "train.warmup_steps": 0, "train.clip": 0.0}))
        await pilot.press("2", "space")
    else:  # the training process dies (a device fault that kills it, the OOM killer)
        await train_endless(pilot)
        pane._live_run._process.kill()
    await wait_until(pilot, lambda: pane.state == "done", 60, "the fault to end the run")
    return pane


@pytest.mark.parametrize("fault, title, fragment", [
    ("nan", "Training stopped: NaN", "loss became nan"),
    ("crash", "Training failed", "training process ended unexpectedly"),
])
async def test_lab_shows_training_faults_and_keeps_working(
    in_tmp: Path, fault: str, title: str, fragment: str,
) -> None:
    """Faults strike in the training process; the lab reports them and carries on.

    (A device error inside the process ends the run the same way as a NaN:
    see the TrainingRun tests above; here the lab's side of both.)"""
    from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
    from tui_lab.ui.panes.decode.decode_pane import DecodePane

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await _lab_run_ends(pilot, app, fault)
        assert pane.reason == ("nan" if fault == "nan" else "error")

        def shown() -> bool:  # notify() posts a message: the toast lands a moment later
            return any(n.severity == "error" and n.title == title and fragment in n.message
                       for n in app._notifications)

        await wait_until(pilot, shown, 10, f"a {title!r} notification")
        assert load_run(pane.run_dir).state["step"] >= 0  # the folder still loads
        if fault == "crash":  # space continues the run from its last checkpoint
            folder, saved = pane.run_dir, load_run(pane.run_dir).state["step"]
            await pilot.press("space")
            await wait_until(pilot, lambda: pane.state == "running" and pane.run is not None
                             and pane.run.step > saved, 60, "the run to continue")
            assert pane.run_dir == folder
            await pilot.press("s")
            await wait_until(pilot, lambda: pane.state == "done", 30, "the run to stop")
        # The app still works: panes switch, the model (last good weights) decodes.
        await pilot.press("3")
        decode = app.query_one(DecodePane)
        field = decode.query_one("#decode-input")
        field.value = "123"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert decode.result is not None
        assert not app._exit and app._exception is None
