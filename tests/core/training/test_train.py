"""Training runs: reproducible, resumable, safe on NaN, and they actually learn."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.runs.folder import load_run
from tui_lab.core.runs.log import read_metrics
from tui_lab.core.training.train import DoneEvent, EvalEvent, StepEvent, TrainingRun, open_run


def _losses(events: list) -> list[float]:
    return [e.loss for e in events if isinstance(e, StepEvent)]


def test_same_seed_same_losses_on_cpu(tiny):
    runs = []
    for _ in range(2):
        events: list = []
        TrainingRun(tiny, None, on_event=events.append).run()
        runs.append(_losses(events))
    assert len(runs[0]) == tiny.train.steps
    assert runs[0] == runs[1]


def test_different_seed_different_losses(tiny):
    a: list = []
    b: list = []
    TrainingRun(tiny, None, on_event=a.append).run()
    TrainingRun(tiny.with_values({"train.seed": 1}), None, on_event=b.append).run()
    assert _losses(a) != _losses(b)


def test_step_events_carry_what_the_lab_shows(tiny):
    events: list = []
    summary = TrainingRun(tiny, None, on_event=events.append).run()
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.step for e in steps] == list(range(1, 31))
    assert all(e.tokens_per_s > 0 and e.lr > 0 and e.grad_norm >= 0 for e in steps)
    assert steps[-1].elapsed > 0
    evals = [e for e in events if isinstance(e, EvalEvent)]
    assert [e.step for e in evals] == [10, 20, 30]
    assert all(0.0 <= e.exact_match <= 1.0 and e.n == 32 for e in evals)
    assert isinstance(events[-1], DoneEvent) and events[-1].reason == "finished"
    assert summary["step"] == 30 and summary["reason"] == "finished"


def test_copy_learns_within_a_small_budget():
    """The tiny copy model reaches 90% exact match in at most 300 steps (about 120 here)."""
    cfg = tiny_config(
        model={"dropout": 0.0},
        task={"max_len": 4},
        train={"steps": 300, "batch_size": 64, "lr": 6e-3, "eval_every": 20, "eval_examples": 100,
               "warmup_steps": 20, "threads": 1, "target_accuracy": 0.9},
    )
    events: list = []
    summary = TrainingRun(cfg, None, on_event=events.append).run()
    assert summary["reason"] == "target", summary
    losses = _losses(events)
    start = sum(losses[:10]) / 10
    end = sum(losses[-10:]) / 10
    assert end < start / 5
    evals = [e.exact_match for e in events if isinstance(e, EvalEvent)]
    assert evals[0] < 0.2 and evals[-1] >= 0.9  # learned here, not by chance at the start


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path, tiny):
    out = tmp_path / "run"
    good = TrainingRun(tiny.with_values({"train.steps": 5}), out)
    good.run()
    before = (out / "model.safetensors").read_bytes()
    absurd = tiny.with_values({"train.lr": 1e30, "train.warmup_steps": 0, "train.clip": 0.0, "train.steps": 200})
    events: list = []
    run = TrainingRun(absurd, out, on_event=events.append, resume=True)
    summary = run.run()
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "nan"
    assert "step" in done.message and summary["reason"] == "nan"
    assert (out / "model.safetensors").read_bytes() == before
    # No checkpoint was saved at the end, but state.json still says how the run ended.
    end = json.loads((out / "state.json").read_text())["end"]
    assert end["reason"] == "nan" and end["message"] == done.message and end["step"] == done.step
    reopened = open_run(out, device="cpu")
    assert reopened.step == 5
    assert all(torch.isfinite(p).all() for p in reopened.model.parameters())


def test_resume_continues_steps_and_curve(tmp_path, tiny):
    out = tmp_path / "run"
    cfg = tiny.with_values({"train.steps": 40})
    first = TrainingRun(cfg, out)

    def stop_at_20(event):
        if isinstance(event, StepEvent) and event.step == 20:
            first.stop()

    first.on_event = stop_at_20
    assert first.run()["reason"] == "stopped"
    assert load_run(out).state["step"] == 20
    assert load_run(out).state["end"] == {"reason": "stopped", "message": "stopped at step 20", "step": 20}
    second = open_run(out, device="cpu")
    assert second.step == 20
    seen_end: list = []
    second.on_event = lambda e: seen_end.append(load_run(out).state.get("end")) if (
        isinstance(e, StepEvent) and e.step == 21) else None
    assert second.run()["step"] == 40
    assert seen_end == [None]  # training again: the old end is gone while it runs
    assert load_run(out).state["end"]["reason"] == "finished"
    steps = [m["step"] for m in read_metrics(out) if m["kind"] == "step"]
    assert steps == list(range(1, 41))


def test_pause_and_resume_from_another_thread(tiny):
    cfg = tiny.with_values({"train.steps": 10_000})
    seen: list[int] = []
    run = TrainingRun(cfg, None, on_event=lambda e: seen.append(e.step) if isinstance(e, StepEvent) else None)
    worker = threading.Thread(target=run.run)
    worker.start()
    while len(seen) < 3:
        threading.Event().wait(0.01)
    run.pause()
    threading.Event().wait(0.3)
    paused_at = len(seen)
    threading.Event().wait(0.3)
    assert len(seen) <= paused_at + 1  # at most the step in flight finishes
    assert run.paused
    run.resume()
    while len(seen) < paused_at + 3:
        threading.Event().wait(0.01)
    run.stop()
    worker.join(timeout=5)
    assert not worker.is_alive()


def test_stop_is_prompt_even_when_paused(tiny):
    run = TrainingRun(tiny.with_values({"train.steps": 10_000}), None)
    run.pause()
    worker = threading.Thread(target=run.run)
    worker.start()
    threading.Event().wait(0.2)
    run.stop()
    worker.join(timeout=1.0)
    assert not worker.is_alive()


@pytest.mark.parametrize("arch_cfg", [
    {"model": {"arch": "decoder-only", "n_encoder_layers": 0, "max_len": 16}},
    {"task": {"name": "addition", "max_digits": 2}, "model": {"max_len": 16}},
])
def test_other_shapes_train_and_evaluate(arch_cfg):
    cfg = tiny_config(**arch_cfg)
    events: list = []
    TrainingRun(cfg, None, on_event=events.append).run()
    evals = [e for e in events if isinstance(e, EvalEvent)]
    assert evals and all(0.0 <= e.exact_match <= 1.0 for e in evals)


def test_explicit_attention_switch_trains_the_same(tiny):
    fused: list = []
    explicit: list = []
    TrainingRun(tiny.with_values({"train.steps": 10}), None, on_event=fused.append).run()
    run = TrainingRun(tiny.with_values({"train.steps": 10, "train.fused_attention": False}), None,
                      on_event=explicit.append)
    from tui_lab.core.model.attention import MultiHeadAttention

    assert all(not m.fused for m in run.model.modules() if isinstance(m, MultiHeadAttention))
    run.run()
    assert _losses(fused) == pytest.approx(_losses(explicit), rel=1e-4)
