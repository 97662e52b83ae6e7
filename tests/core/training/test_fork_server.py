"""The fork server: training processes forked from one process that imported torch once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.conftest import tiny_config
from tui_lab.core.training import remote as run_process

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_runs_are_forked_by_one_server_and_end_by_themselves(tmp_path: Path) -> None:
    server = run_process.fork_server()
    assert server is not None
    runs = [run_process.RemoteRun(lambda e: None, config=tiny_config(), out_dir=tmp_path / name)
            for name in ("a", "b")]
    try:
        for run in runs:
            assert parent_of(run._process.pid) == server.process.pid  # not a fresh interpreter
            assert run.alive
        assert runs[1].run()["reason"] == "finished"
        assert (tmp_path / "b" / "state.json").exists()
    finally:
        for run in runs:
            run.close()
    assert [run._process.poll() for run in runs] == [0, 0]  # each saved and ended by itself


def test_a_lab_closing_its_runs_leaves_the_server_to_the_next_lab(tmp_path: Path) -> None:
    """The lab's exit (``shutdown_all``) closes its runs; the server, which would leave on
    EOF when the process ends, serves the next lab of the same process (tests open many)."""
    server = run_process.fork_server()
    assert server is not None
    run = run_process.RemoteRun(lambda e: None, config=tiny_config(), out_dir=tmp_path / "a")
    run_process.shutdown_all()
    assert run._process.poll() is not None  # the lab's run ended (and saved)
    assert run_process.fork_server() is server and server.alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_forked_process_starts_in_the_folder_the_lab_is_in_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_process.fork_server() is not None  # started from wherever the suite was
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    run = run_process.RemoteRun(lambda e: None, config=tiny_config(), out_dir=tmp_path / "run")
    try:
        assert os.readlink(f"/proc/{run._process.pid}/cwd") == str(tmp_path / "here")
    finally:
        run.close()


def test_a_killed_forked_process_reports_the_signal_as_its_exit_code(tmp_path: Path) -> None:
    run = run_process.RemoteRun(
        lambda e: None, config=tiny_config(train={"steps": 100_000}), out_dir=tmp_path / "run"
    )
    try:
        assert run._process.poll() is None
        run._process.kill()
        assert run._process.wait(30) == -signal.SIGKILL  # as subprocess.Popen says it
        assert not run.alive
    finally:
        run.close()


def test_a_forked_command_runs_in_its_own_session_and_stops_and_saves_on_ctrl_c(tmp_path: Path) -> None:
    """``run_module`` (the sweep's launcher): ``python -m tui_lab.cli train`` forked with torch
    loaded, its output in the given files, ctrl+c as in a fresh interpreter (the server
    itself ignores it), the exit code the command gives."""
    import json
    import time

    server = run_process.fork_server()
    assert server is not None
    preset = tmp_path / "tiny.yaml"
    preset.write_text(tiny_config(train={"steps": 1_000_000}).to_yaml())
    run = tmp_path / "run"
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = server.run_module(
            "tui_lab.cli", ["train", "--preset", str(preset), "--out", str(run), "--json"],
            out.fileno(), err.fileno(), threads=1,
        )
    try:
        deadline = time.monotonic() + 60
        while not (run / "metrics.jsonl").exists() or b'"step"' not in (run / "metrics.jsonl").read_bytes():
            assert proc.poll() is None, (tmp_path / "err").read_text()
            assert time.monotonic() < deadline, "no step within 60 s"
            time.sleep(0.02)
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)  # a session of its own
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, (tmp_path / "err").read_text()
    finally:
        proc.kill()
    summary = json.loads((tmp_path / "out").read_text().strip().splitlines()[-1])
    assert summary["reason"] == "stopped"
    assert json.loads((run / "state.json").read_text())["step"] == summary["step"] >= 1


def test_a_forked_module_ends_on_ctrl_c_as_a_fresh_interpreter_would(tmp_path: Path) -> None:
    """A module with no ctrl+c handling of its own: SIGINT ends it as it ends ``python -m``
    (killed by SIGINT), although the server that forked it ignores the signal."""
    import time

    server = run_process.fork_server()
    assert server is not None
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = server.run_module("tests.core.training.sleeper", [], out.fileno(), err.fileno())
    try:
        deadline = time.monotonic() + 30
        while b"ready" not in (tmp_path / "out").read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "err").read_text()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == -signal.SIGINT
    finally:
        proc.kill()
