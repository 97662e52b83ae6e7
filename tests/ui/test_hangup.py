"""The lab notices a terminal that has gone away (and only then)."""

from __future__ import annotations

import os
import pty

import pytest

from tui_lab.ui.hangup import hung_up

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs ptys")


def test_a_pty_hangs_up_when_its_terminal_closes() -> None:
    master, slave = pty.openpty()
    try:
        assert not hung_up(slave)
        os.write(master, b"2")  # a key waiting to be read is not a hang-up
        assert not hung_up(slave)
        os.close(master)
        assert hung_up(slave)
    finally:
        os.close(slave)


def test_a_pipe_hangs_up_when_its_writer_closes() -> None:
    read_end, write_end = os.pipe()
    try:
        assert not hung_up(read_end)
        os.close(write_end)
        assert hung_up(read_end)
    finally:
        os.close(read_end)
