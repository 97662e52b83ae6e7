"""The lab's trainer process: driven like a TrainingRun, never losing a run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.model.models import build_model
from tui_lab.core.runs import checkpoint as ckpt
from tui_lab.core.runs.events import DoneEvent, EvalEvent, StepEvent
from tui_lab.core.runs.folder import load_run
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD
from tui_lab.core.training import remote as run_process


def wait_for(predicate, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def saved_model(run_dir: Path):  # type: ignore[no-untyped-def]
    loaded = load_run(run_dir)
    task = make_task(loaded.config.task)
    model = build_model(loaded.config.model, vocab_size=len(task.vocab), pad_id=PAD)
    ckpt.load_weights(run_dir, model)
    return loaded, model


def test_a_remote_run_trains_reports_and_hands_over_its_weights(tmp_path: Path) -> None:
    events: list[object] = []
    run = run_process.RemoteRun(events.append, config=tiny_config(), out_dir=tmp_path / "run")
    try:
        assert run.step == 0 and run.total_steps == 30 and run.device_name.startswith("cpu")
        summary = run.run()
        assert summary is not None and summary["reason"] == "finished"
        steps = [e.step for e in events if isinstance(e, StepEvent)]
        assert steps == list(range(1, 31))  # every step, in order, through the pipe
        assert [e.step for e in events if isinstance(e, EvalEvent)] == [10, 20, 30]
        assert isinstance(events[-1], DoneEvent) and events[-1].reason == "finished"
        assert run.step == 30 and run.last_step is not None and run.last_step.step == 30

        loaded, reference = saved_model(tmp_path / "run")
        assert loaded.state["step"] == 30
        model = run.model  # fetched from the process: the weights it saved at the end
        for (name, mine), (_, theirs) in zip(
            model.state_dict().items(), reference.state_dict().items(), strict=True
        ):
            assert torch.equal(mine, theirs), name
    finally:
        run.close()
    assert not run.alive


def test_pause_holds_the_step_and_stop_saves_where_it_stopped(tmp_path: Path) -> None:
    events: list[object] = []
    run = run_process.RemoteRun(
        events.append, config=tiny_config(train={"steps": 100_000}), out_dir=tmp_path / "run"
    )
    loop = threading.Thread(target=run.run)
    try:
        loop.start()
        wait_for(lambda: run.step >= 3, 60, "steps")
        run.pause()
        time.sleep(0.3)  # a step already under way may still land
        held = run.step
        time.sleep(0.5)
        assert run.step == held
        run.resume()
        wait_for(lambda: run.step > held, 30, "steps after resuming")
        run.stop()
        loop.join(30)
        assert not loop.is_alive()
        done = events[-1]
        assert isinstance(done, DoneEvent) and done.reason == "stopped"
        assert load_run(tmp_path / "run").state["step"] == run.step == done.step
    finally:
        run.close()


def test_a_folder_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(run_process.RunProcessError, match="no such run folder"):
        run_process.RemoteRun(lambda e: None, resume_dir=tmp_path / "missing")


def test_a_resumed_run_continues_from_its_checkpoint(tmp_path: Path) -> None:
    first = run_process.RemoteRun(lambda e: None, config=tiny_config(), out_dir=tmp_path / "run")
    first.run()
    first.close()
    events: list[object] = []
    run = run_process.RemoteRun(events.append, resume_dir=tmp_path / "run")
    try:
        assert run.step == 30 and run.config.name == "tiny"
    finally:
        run.close()


def test_a_killed_training_process_ends_the_run_with_a_message(tmp_path: Path) -> None:
    events: list[object] = []
    run = run_process.RemoteRun(
        events.append, config=tiny_config(train={"steps": 100_000}), out_dir=tmp_path / "run"
    )
    result: list[object] = []
    loop = threading.Thread(target=lambda: result.append(run.run()))
    try:
        loop.start()
        wait_for(lambda: run.step >= 2, 60, "steps")
        run._process.kill()
        loop.join(30)
        assert not loop.is_alive(), "run() must return when its process dies"
        done = events[-1]
        assert isinstance(done, DoneEvent) and done.reason == "error"
        assert "ended unexpectedly" in done.message
        model = run.model  # from the last checkpoint on disk, not random weights
        _, reference = saved_model(tmp_path / "run")
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters(), strict=True))
    finally:
        run.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_the_process_saves_and_ends_when_the_lab_is_killed(tmp_path: Path) -> None:
    """kill -9 of the lab: the trainer reads EOF on its pipe, stops, saves, exits."""
    out = tmp_path / "run"
    lab = textwrap.dedent(
        f"""
        import sys, time, threading
        sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
        from tests.conftest import tiny_config
        from tui_lab.core.training import remote as run_process
        run = run_process.RemoteRun(lambda e: None, config=tiny_config(train={{"steps": 100_000}}),
                                    out_dir={str(out)!r})
        print(run._process.pid, flush=True)
        threading.Thread(target=run.run, daemon=True).start()
        while run.step < 5:
            time.sleep(0.02)
        print("training", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", lab], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert proc.stdout.readline().strip() == "training"
        server = _parent(child)  # the fork server, where there is one; else the lab itself
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 30
        while (_alive(child) or _alive(server)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the training process outlived the lab"
        assert not _alive(server), "the fork server outlived the lab"
        state = load_run(out).state
        assert state["step"] >= 5  # its last save came after the lab died
    finally:
        proc.kill()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its dead parent's reaper) counts as gone.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def test_a_prewarmed_process_finds_relative_folders_from_where_the_lab_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spare starts in one folder; the lab may be elsewhere by the time it is used."""
    (tmp_path / "then").mkdir()
    (tmp_path / "now").mkdir()
    monkeypatch.chdir(tmp_path / "then")
    run_process.prewarm()
    monkeypatch.chdir(tmp_path / "now")
    run = run_process.RemoteRun(lambda e: None, config=tiny_config(), out_dir="runs/a")
    try:
        assert run.out_dir == Path("runs/a")  # shown as the user named it
        run.run()
    finally:
        run.close()
    assert load_run(tmp_path / "now" / "runs" / "a").state["step"] == 30
    assert not (tmp_path / "then" / "runs").exists()


def test_no_weights_from_a_process_that_died_before_its_first_checkpoint(tmp_path: Path) -> None:
    run = run_process.RemoteRun(lambda e: None, config=tiny_config(), out_dir=tmp_path / "run")
    try:
        run._process.kill()  # built, never trained: nothing saved yet
        run._process.wait(10)
        with pytest.raises(run_process.RunProcessError, match="left no checkpoint"):
            run.model  # noqa: B018 - the property fetches the weights
    finally:
        run.close()
