"""Measure the lab as a user feels it, in a real pseudo-terminal (120x40).

    python -m bench.measure [--preset copy] [--samples 30] [--json]

- first paint: seconds from starting the process until the Build pane's
  first frame is written (torch loads afterwards, in a worker);
- key to repaint: while the preset trains, the time from pressing a pane's
  number (1-5, in a fixed random order, each from the other panes) until
  that pane's text is written, as p50/p95 in milliseconds, overall and per
  pane. After Decode (whose input takes the keys) an unmeasured escape
  leaves the field first.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import random
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROWS, COLS = 40, 120

# Text each pane writes when it is shown (and the pane it comes from does not).
PANE_TEXT = {
    "1": ("build", b"Presets"),
    "2": ("train", b"grad norm"),  # unique to Train (Build has a "learning rate" field)
    "3": ("decode", b"Examples"),
    "4": ("attention", b"decode yet"),
    "5": ("params", b"component"),
}


def key_order(samples: int, seed: int = 0) -> list[str]:
    """Pane keys to press: each differs from the one before, the first leaves Train."""
    rng = random.Random(seed)
    keys, last = [], "2"
    for _ in range(samples):
        last = rng.choice([k for k in PANE_TEXT if k != last])
        keys.append(last)
    return keys


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``values``."""
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


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


def no_stop_preset(folder: str, name: str) -> str:
    """Preset ``name`` as a YAML file in ``folder``, without its early stop and with many
    steps, so that training lasts as long as a measurement does."""
    from tui_lab.core.config.presets import load_preset

    config = load_preset(name).with_values({"train.target_accuracy": None, "train.steps": 100_000})
    path = Path(folder) / f"{config.name}.yaml"
    path.write_text(config.to_yaml(), encoding="utf-8")
    return str(path)


def measure(preset: str, samples: int, train: bool = True) -> dict[str, object]:
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
    with tempfile.TemporaryDirectory(prefix="tfx-lab-measure-") as runs:
        env["TFX_LAB_RUNS"] = runs
        if train:
            preset = no_stop_preset(runs, preset)
        code = f"from tui_lab.ui.app import run_lab; run_lab(preset={preset!r})"
        term = Terminal([sys.executable, "-W", "ignore", "-c", code], env)
        try:
            term.expect(b"Presets", 30)
            first_paint = time.perf_counter() - term.started
            term.expect(b"ready", 120)  # torch loaded
            term.drain()
            term.send("2")
            term.expect(PANE_TEXT["2"][1], 10)
            if train:
                term.send(" ")
                term.expect(b"training", 60)
                time.sleep(2.0)  # let it reach full speed
            latencies: list[tuple[str, float]] = []
            previous = "2"
            for key in key_order(samples):
                if previous == "3":  # the Decode input has the keys: leave it first
                    term.send("\x1b")
                    time.sleep(0.3)
                previous = key
                term.drain()
                sent = term.send(key)
                term.expect(PANE_TEXT[key][1], 10)
                latencies.append((PANE_TEXT[key][0], (time.perf_counter() - sent) * 1000))
                time.sleep(0.15)
        finally:
            term.close()
    every = sorted(ms for _, ms in latencies)
    per_pane = {}
    for name, _ in PANE_TEXT.values():
        mine = sorted(ms for pane, ms in latencies if pane == name)
        if mine:
            per_pane[name] = {
                "p50": round(statistics.median(mine), 1),
                "p95": round(percentile(mine, 0.95), 1),
                "max": round(mine[-1], 1),
                "samples": len(mine),
            }
    return {
        "first_paint_s": round(first_paint, 3),
        "key_to_repaint_ms": {
            "p50": round(statistics.median(every), 1),
            "p95": round(percentile(every, 0.95), 1),
            "max": round(every[-1], 1),
            "samples": len(every),
            "while_training": train,
            "per_pane": per_pane,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.measure", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--preset", default="copy")
    parser.add_argument("--samples", type=int, default=50, help="pane switches (default 50)")
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
        for pane, p in k["per_pane"].items():  # type: ignore[index]
            print(f"  {pane:<10} p50 {p['p50']} ms, p95 {p['p95']} ms ({p['samples']} samples)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
