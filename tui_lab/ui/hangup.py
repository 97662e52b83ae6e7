"""Whether the lab's terminal has gone away.

When a terminal closes its end without a hang-up signal reaching the lab (a
pty closed by the program that opened it, stdin at end of file), Textual's
input thread reads nothing, forever, as fast as it can: the lab kept a core
busy, and a training run going, with nobody to see either. The lab polls for
this once a second and quits as ``ctrl+q`` would (the run saves and stops).
"""

from __future__ import annotations

import select

CHECK_SECONDS = 1.0


def hung_up(fd: int) -> bool:
    """True if the other end of ``fd`` (a tty or pipe we read keys from) is closed."""
    if not hasattr(select, "poll"):  # Windows: its driver reads the console, no fd to watch
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        events = poller.poll(0)
    except OSError:
        return True
    return any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in events)
