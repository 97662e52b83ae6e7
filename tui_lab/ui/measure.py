"""Measure the lab as a user feels it, in a real pseudo-terminal (120x40).

    python -m tui_lab.ui.measure [--preset copy] [--samples 30] [--json]

- first paint: seconds from starting the process until the Build pane's
  first frame is written (torch loads afterwards, in a worker);
- key to repaint: while the preset trains in the Train pane, the time from
  pressing 4 (Attention) or 2 (Train) until that pane's text is written,
  as p50/p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

ROWS, COLS = 40, 120


class Terminal:
    """A child process on a pty; ``expect`` waits for bytes in what it writes."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        os.close(slave)
        self.fd = master
        self.buffer = b""

    def drain(self) -> None:
        """Forget what was written so far (and anything arriving right now)."""
        while select.select([self.fd], [], [], 0)[0]:
            try:
                self.buffer += os.read(self.fd, 65536)
            except OSError:
                break
        self.buffer = b""

    def expect(self, needle: bytes, timeout: float) -> float:
        """Seconds until ``needle`` appears in the output (from the last drain)."""
        start = time.perf_counter()
        while needle not in self.buffer:
            left = timeout - (time.perf_counter() - start)
            if left <= 0:
                raise TimeoutError(f"{needle!r} not written within {timeout}s")
            if select.select([self.fd], [], [], min(left, 0.05))[0]:
                try:
                    self.buffer += os.read(self.fd, 65536)
                except OSError as exc:
                    raise TimeoutError("the lab exited") from exc
        return time.perf_counter() - start

    def send(self, text: str) -> float:
        os.write(self.fd, text.encode())
        return time.perf_counter()

    def close(self) -> None:
        try:
            os.write(self.fd, b"\x11")  # ctrl+q
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        os.close(self.fd)


def measure(preset: str, samples: int, train: bool = True) -> dict[str, object]:
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
    with tempfile.TemporaryDirectory(prefix="tfx-lab-measure-") as runs:
        env["TFX_LAB_RUNS"] = runs
        code = f"from tui_lab.ui.app import run_lab; run_lab(preset={preset!r})"
        term = Terminal([sys.executable, "-W", "ignore", "-c", code], env)
        try:
            term.expect(b"Presets", 30)
            first_paint = time.perf_counter() - term.started
            term.expect(b"ready", 120)  # torch loaded
            term.drain()
            term.send("2")
            term.expect(b"learning rate", 10)
            if train:
                term.send(" ")
                term.expect(b"training", 60)
                time.sleep(2.0)  # let it reach full speed
            latencies = []
            for i in range(samples):
                key, needle = ("4", b"decode yet") if i % 2 == 0 else ("2", b"learning rate")
                term.drain()
                sent = term.send(key)
                term.expect(needle, 10)
                latencies.append((time.perf_counter() - sent) * 1000)
                time.sleep(0.15)
        finally:
            term.close()
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
    return {
        "first_paint_s": round(first_paint, 3),
        "key_to_repaint_ms": {
            "p50": round(statistics.median(latencies), 1),
            "p95": round(p95, 1),
            "max": round(latencies[-1], 1),
            "samples": len(latencies),
            "while_training": train,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tui_lab.ui.measure", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--preset", default="copy")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--idle", action="store_true", help="measure keys without training")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    result = measure(args.preset, args.samples, train=not args.idle)
    if args.json:
        print(json.dumps(result))
    else:
        k = result["key_to_repaint_ms"]
        print(f"first paint     {result['first_paint_s']:.3f} s")
        print(
            f"key to repaint  p50 {k['p50']} ms, p95 {k['p95']} ms, max {k['max']} ms "  # type: ignore[index]
            f"({k['samples']} samples{' while training' if k['while_training'] else ', idle'})"
        )  # type: ignore[index]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
