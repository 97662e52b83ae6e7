"""`tfx-lab serve` without a browser: what it refuses before listening, and what it says.

The browser itself is driven in tests/browser.
"""

from __future__ import annotations

import argparse
import shlex
import socket
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, tfx, tfx_executable
from tui_lab.cli.serve import lab_command, startup_lines


def test_a_bad_preset_or_run_is_refused_before_anything_listens(tmp_path: Path) -> None:
    assert_one_line_error(tfx("serve", "--preset", "nope"), "did you mean")
    assert_one_line_error(tfx("serve", "--run", str(tmp_path / "missing")), "missing")
    assert_one_line_error(tfx("serve", "--port", "70000"), "a port is 1 to 65535")


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # In its own interpreter: serve installs signal handlers and an event loop.
        proc = tfx_executable("serve", "--port", str(port))
    assert_one_line_error(proc, f"port {port} is already in use")
    assert proc.returncode == 2


def test_every_tab_runs_this_lab_with_the_same_options(tmp_path: Path) -> None:
    preset = tmp_path / "my preset.yaml"  # a space: the command must stay one argument
    preset.write_text("description: x\n")
    args = argparse.Namespace(runs_dir=str(tmp_path / "runs dir"), run=None, preset=str(preset))
    argv = shlex.split(lab_command(args))
    assert argv[:3] == [sys.executable, "-m", "tui_lab.cli"]
    assert argv[3:] == ["--runs-dir", str(tmp_path / "runs dir"), "--preset", str(preset)]
    named = shlex.split(lab_command(argparse.Namespace(runs_dir=None, run=None, preset="copy")))
    assert named[3:] == ["--preset", "copy"]  # a shipped preset stays a name


@pytest.mark.parametrize(("host", "local"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                             ("0.0.0.0", False), ("192.168.1.5", False)])
def test_the_startup_line_says_where_and_who_can_train(host: str, local: bool) -> None:
    lines = startup_lines(host, 8000)
    assert ":8000" in lines[0] and "anyone who can reach this address can train" in lines[1]
    assert ("WARNING" in lines[1]) is not local
    assert ("this machine only" in lines[0]) is local
