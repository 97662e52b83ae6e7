"""Processes: kill -9 at any moment of training, ctrl+c, and quitting the lab while it trains.

The kill test runs ``tfx-lab train`` (forked with torch loaded, as the sweep
runner starts it) on a tiny preset that
checkpoints after every step (so most of its time is spent saving) and
SIGKILLs it again and again: at random moments, and the instant a save has
staged its files (weights written, renames not yet done). After each kill the
folder must load with ``tfx-lab eval`` and resume with ``train --resume``.
tests/core/test_checkpoint.py does the same to save_checkpoint alone, in forked
writers; this is the whole command.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import (
    ROOT,
    TFX,
    assert_timestamped,
    cli,
    log_lines,
    state,
    temps,
    tiny,
)

SEED = 20240607


def preset(folder: Path, **train: object) -> Path:
    path = folder / "tiny.yaml"
    settings = {"steps": 1_000_000, "checkpoint_seconds": 1e-6, "eval_every": 40, "eval_examples": 16, **train}
    path.write_text(tiny(train=settings).to_yaml())
    return path


def start(folder: Path, *args: object) -> subprocess.Popen[str]:
    log = open(folder / "child.log", "a")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [*TFX, *[str(a) for a in args]], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def start_forked(folder: Path, *args: object) -> Any:
    """``tfx-lab ARGS`` forked by the fork server (``ForkServer.run_module``): the process a
    fresh interpreter would be, torch already loaded. For the kill -9 rounds, where what
    matters is what a killed writer leaves on disk, not how the process started (the
    ctrl+c tests below start the real executable)."""
    from tui_lab.core.training.remote import fork_server

    server = fork_server()
    if server is None:
        return start(folder, *args)
    with open(folder / "child.log", "ab") as log:
        return server.run_module("tui_lab.cli", [str(a) for a in args], log.fileno(), log.fileno())


def wait_for(predicate, timeout: float, proc: Any, folder: Path, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"tfx-lab exited ({proc.returncode}) while waiting for {what}:\n"
                                 + (folder / "child.log").read_text()[-2000:])
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def starts_logged(run: Path) -> int:
    try:
        return sum("training on" in line for line in log_lines(run))
    except FileNotFoundError:
        return 0


def staged(run: Path, pid: int, names: tuple[str, ...]) -> str | None:
    """The name of a file ``pid`` has staged but not yet renamed into place, if any."""
    try:
        present = os.listdir(run)
    except FileNotFoundError:
        return None
    for name in names:
        if f".{name}.tmp-{pid}" in present:
            return name
    return None


def test_kill_9_at_random_moments_and_mid_save_always_leaves_a_loadable_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    rng = random.Random(SEED)
    run = tmp_path / "run"
    tiny_yaml = preset(tmp_path)
    # (how to pick the moment, ...): random moments, and right inside a save.
    # Every file mid-save once, and one moment anywhere: four starts of `tfx-lab train`.
    plan = ["weights staged", "random", "state staged", "optimizer staged"]
    caught: list[str] = []
    last_step = 0
    for round_no, moment in enumerate(plan):
        before = starts_logged(run)
        if round_no == 0:
            proc = start_forked(tmp_path, "train", "--preset", tiny_yaml, "--out", run)
        else:
            proc = start_forked(tmp_path, "train", "--resume", run)
        try:
            # Training has started (and, the first time, a checkpoint exists).
            wait_for(lambda b=before: starts_logged(run) > b and (run / "state.json").exists(),
                     120, proc, tmp_path, "training to start")
            if moment == "random":
                time.sleep(rng.uniform(0.0, 0.6))
                caught.append("random")
            else:
                name = {"weights staged": "model.safetensors", "state staged": "state.json",
                        "optimizer staged": "optimizer.pt"}[moment]
                # Any staged file means a save is under way; prefer the one the plan names.
                wanted = (name, "model.safetensors", "optimizer.pt", "state.json")
                deadline = time.monotonic() + 20
                hit = None
                while hit is None and time.monotonic() < deadline and proc.poll() is None:
                    hit = staged(run, proc.pid, (name,)) or (
                        staged(run, proc.pid, wanted) if time.monotonic() > deadline - 15 else None)
                    # A save's staged files live for milliseconds (written, then synced):
                    # looking every 0.2 ms still sees them, and leaves the trainer a core.
                    time.sleep(0.0002)
                assert hit is not None, "never saw a save under way"
                caught.append(f"{hit} staged")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL

        # The folder loads, with the CLI's own code path, and says where it is.
        result = cli(capsys, "eval", "--run", run, "--n", "8", "--json")
        assert result.rc == 0, (caught[-1], result.err)
        assert "Traceback" not in result.err
        record = json.loads(result.out)
        assert record["step"] >= last_step, (caught[-1], record)  # never goes backwards
        last_step = record["step"]
        json.loads((run / "state.json").read_text())
        assert len(temps(run)) <= 4  # only the killed writer's leftovers, if any

    with capsys.disabled():  # shown with -s: where each kill landed
        print("\nkill moments:", caught, "last step", last_step)
    assert any("staged" in c for c in caught), caught
    # One more resume trains on and cleans up.
    result = cli(capsys, "train", "--resume", run, "--steps", str(last_step + 3), "--json")
    assert result.rc == 0, result.err
    assert state(run)["step"] == last_step + 3
    assert temps(run) == []  # stale staging files of dead writers are removed
    lines = log_lines(run)
    assert_timestamped(lines)
    assert sum("training on" in line for line in lines) == len(plan) + 1


@pytest.fixture
def training_process(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real ``tfx-lab train`` that has done some steps; no periodic checkpoints after the first."""
    run = tmp_path / "run"
    proc = start(tmp_path, "train", "--preset", preset(tmp_path, checkpoint_seconds=3600), "--out", run,
                 "--json")
    try:
        def steps() -> int:
            try:
                return (run / "metrics.jsonl").read_text().count('"kind":"step"')
            except FileNotFoundError:
                return 0

        wait_for(lambda: steps() >= 20, 120, proc, tmp_path, "20 steps")
        yield proc, run
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_saves_and_exits_cleanly(training_process, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    proc, run = training_process
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0  # a hang guard: it exits by itself
    output = (run.parent / "child.log").read_text()
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    summary = json.loads(output.strip().splitlines()[-1])
    assert summary["reason"] == "stopped"
    # The final checkpoint is the step it stopped at (periodic saves were off).
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if '"kind":"step"' in line]
    assert state(run)["step"] == steps[-1] == summary["step"] >= 20
    assert log_lines(run)[-1].endswith(f"stopped at step {steps[-1]}")
    assert cli(capsys, "eval", "--run", run, "--n", "8").rc == 0


def test_ctrl_c_twice_still_leaves_a_loadable_run(training_process, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """An impatient second ctrl+c may cut the final save short: exit 0 or 130, never a traceback."""
    proc, run = training_process
    proc.send_signal(signal.SIGINT)
    time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) in (0, 130)
    output = (run.parent / "child.log").read_text()
    assert "Traceback" not in output
    result = cli(capsys, "eval", "--run", run, "--n", "8", "--json")
    assert result.rc == 0, result.err


async def test_quitting_the_lab_while_training_stops_and_saves_the_run(in_tmp: Path) -> None:
    from tests.ui.helpers import SIZE, ready, tiny_app, train_endless
    from tui_lab.core.runs.folder import load_run

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await train_endless(pilot, steps=5)
        run = pane.run
        await pilot.press("q")
        assert app._exit
    assert pane.loop_finished.wait(30), "training went on after q"  # a hang guard, not a speed claim
    saved = load_run(run.out_dir).state
    assert saved["step"] == run.step >= 5  # stopped and saved where it stopped
    assert saved["end"]["reason"] == "stopped", saved.get("end")  # by q, a million steps short


def test_the_lab_quits_and_saves_when_its_terminal_goes_away(tmp_path: Path) -> None:
    """A closed terminal that sends no hang-up: the lab used to spin a core forever."""
    from bench.measure import Terminal
    from tui_lab.core.runs.folder import load_run

    preset_path = preset(tmp_path, checkpoint_seconds=60.0)
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "TFX_LAB_RUNS": str(runs)}
    term = Terminal([*TFX, "--preset", str(preset_path)], env)
    try:
        term.expect(b"Presets", 60)
        term.expect(b"ready", 120)
        term.send("2")
        term.expect(b"grad norm", 30)
        term.send(" ")
        metrics = lambda: list(runs.glob("*/metrics.jsonl"))  # noqa: E731
        deadline = time.monotonic() + 120
        while not (metrics() and metrics()[0].read_text().count('"kind":"step"') >= 5):
            assert time.monotonic() < deadline, "the lab did not start training"
            term.drain()
            time.sleep(0.2)
        os.close(term.fd)  # the terminal goes; no ctrl+q, no SIGHUP
        assert term.proc.wait(timeout=20) == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()
    run = metrics()[0].parent
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if '"kind":"step"' in line]
    assert load_run(run).state["step"] == steps[-1] >= 5  # stopped and saved at its last step
