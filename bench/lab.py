"""The ``lab`` item of ``python -m bench``: the lab as a user feels it, in a real terminal.

First paint and key-to-repaint latency come from
``bench.measure.measure`` (a cold ``run_lab`` in a child process on a
120x40 pty; the five panes' keys pressed in a random order while the copy
preset trains, without its early stop).

``measure`` does not report training speed, so this module measures it with
``measure.Terminal``: the lab (Train pane shown, no keys pressed) and a headless
``tfx-lab train`` child process train the same preset at the same time, but
only one of them runs at any moment: the other is frozen with SIGSTOP (the
whole process group: the lab trains in a child process), and they swap every
few seconds. Each window's rate is read from the run folder's
``metrics.jsonl`` (the wall-clock time at which each step first appears), and
the ratio of each lab window to its neighbouring headless windows is kept; the
figure is their median. Interleaving this finely matters: on a shared machine
two sessions a minute apart differ by more than the effect being measured.
Both runs use the copy preset without its early stop (so neither ends inside
the measurement); evaluations every 100 steps fall into both alike.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import Row, Section

PRESET = "copy"
FIRST_PAINT_GOAL = 1.0
P95_GOAL_MS = 50.0
THROUGHPUT_GOAL = 0.9


class StepWatcher(threading.Thread):
    """Polls ``metrics.jsonl`` files matching a glob; records when each step first appears."""

    def __init__(self, pattern: str, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pattern = pattern
        self.interval = interval
        self.seen: dict[int, float] = {}  # step -> perf_counter when first read
        self.elapsed: dict[int, float] = {}  # step -> TrainingRun.elapsed
        self._halt = threading.Event()
        self._path: str | None = None
        self._offset = 0
        self._partial = ""

    def run(self) -> None:
        while not self._halt.is_set():
            self.poll()
            self._halt.wait(self.interval)
        self.poll()

    def poll(self) -> None:
        if self._path is None:
            found = sorted(glob.glob(self.pattern))
            if not found:
                return
            self._path = found[-1]
        try:
            with open(self._path, encoding="utf-8") as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except OSError:
            return
        now = time.perf_counter()
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()  # an unfinished last line waits for the next poll
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("kind") == "step":
                step = int(rec["step"])
                self.seen.setdefault(step, now)
                self.elapsed.setdefault(step, float(rec["elapsed"]))

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def lab_session(samples: int, train: bool, preset: str = PRESET) -> dict[str, Any]:
    """One ``measure.measure`` session: first paint and key-to-repaint latency."""
    from bench import measure

    return measure.measure(preset, samples, train=train)


def _window_rate(w: StepWatcher, t0: float, t1: float) -> float | None:
    """Steps per second between the first and last step first seen inside [t0, t1]."""
    inside = sorted((t, s) for s, t in w.seen.items() if t0 <= t <= t1)
    if len(inside) < 3 or inside[-1][0] - inside[0][0] < 0.3:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def interleaved_lab_vs_headless(windows: int, window_s: float, lab_prelude: str = "") -> dict[str, Any]:
    """The lab and a headless run of the same preset, alternately frozen (SIGSTOP/SIGCONT).

    ``lab_prelude``: Python run in the lab's process before it starts (for experiments).
    """
    import signal

    from bench import measure

    with tempfile.TemporaryDirectory(prefix="tfx-bench-lab-") as tmp:
        preset = measure.no_stop_preset(tmp, PRESET)
        name = Path(preset).stem
        runs = os.path.join(tmp, "runs")
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(measure.COLS), LINES=str(measure.ROWS))
        env["TFX_LAB_RUNS"] = runs
        lab_w = StepWatcher(os.path.join(runs, f"{name}-*", "metrics.jsonl"))
        head_out = os.path.join(tmp, "headless")
        head_w = StepWatcher(os.path.join(head_out, "metrics.jsonl"))
        code = f"{lab_prelude}\nfrom tui_lab.ui.app import run_lab; run_lab(preset={preset!r})"
        term = measure.Terminal([sys.executable, "-W", "ignore", "-c", code], env)
        head: subprocess.Popen[bytes] | None = None
        lab_rates: list[float] = []
        head_rates: list[float] = []
        try:
            term.expect(b"Presets", 30)
            term.expect(b"ready", 120)
            term.drain()
            term.send("2")
            term.expect(measure.PANE_TEXT["2"][1], 10)
            lab_w.start()
            term.send(" ")
            term.expect(b"training", 60)
            head = subprocess.Popen(
                [sys.executable, "-W", "ignore", "-c", "import sys; from tui_lab.cli import main; sys.exit(main())",
                 "train", "--preset", preset, "--out", head_out, "--json"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
            head_w.start()
            os.killpg(term.proc.pid, signal.SIGSTOP)
            # Warm-up: the headless run loads torch and takes its first steps alone.
            deadline = time.perf_counter() + 60
            while len(head_w.seen) < 20 and time.perf_counter() < deadline:
                time.sleep(0.1)
            procs = {"lab": term.proc.pid, "headless": head.pid}
            rates = {"lab": lab_rates, "headless": head_rates}
            watchers = {"lab": lab_w, "headless": head_w}
            os.killpg(head.pid, signal.SIGSTOP)
            for k in range(2 * windows):
                who = ("lab", "headless")[k % 2]
                os.killpg(procs[who], signal.SIGCONT)
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < window_s:
                    if who == "lab":
                        term.drain()  # read what the lab writes, as a terminal would
                    time.sleep(0.02)
                t1 = time.perf_counter()
                os.killpg(procs[who], signal.SIGSTOP)
                time.sleep(0.05)  # the watcher's last poll of this window
                rate = _window_rate(watchers[who], t0 + 0.3, t1)  # skip the wake-up
                rates[who].append(rate if rate is not None else float("nan"))
        finally:
            for pid in (term.proc.pid, head.pid if head else None):
                if pid is not None:
                    try:
                        os.killpg(pid, signal.SIGCONT)
                    except OSError:
                        pass
            if head is not None:
                head.terminate()
                try:
                    head.wait(10)
                except subprocess.TimeoutExpired:
                    head.kill()
            term.close()
            lab_w.stop()
            head_w.stop()
    # Each lab window against the mean of the headless windows either side of it.
    ratios = []
    for i, lab_rate in enumerate(lab_rates):
        near = [r for r in head_rates[max(0, i - 1) : i + 1] if r == r]
        if lab_rate == lab_rate and near:
            ratios.append(lab_rate / statistics.mean(near))
    return {
        "ratio": statistics.median(ratios) if ratios else None,
        "ratios": [round(r, 3) for r in ratios],
        "lab_steps_per_s": [round(r, 2) for r in lab_rates],
        "headless_steps_per_s": [round(r, 2) for r in head_rates],
        "window_s": window_s,
    }


def lab_bench(quick: bool, preset: str = PRESET) -> Section:
    sec = Section("lab", "6. the lab in a real terminal (pty 120x40, measure.py)")
    samples = 30 if quick else 60
    result = lab_session(samples, train=True, preset=preset)
    paints = [result["first_paint_s"]]
    if not quick:
        for _ in range(2):
            paints.append(lab_session(3, train=False, preset=preset)["first_paint_s"])
    first_paint = statistics.median(paints)
    keys = result["key_to_repaint_ms"]

    # Training speed: the lab on its Train pane (no keys) against a headless run,
    # alternately frozen so both see the same machine (see the module docstring).
    speed = interleaved_lab_vs_headless(windows=6 if quick else 12, window_s=2.5 if quick else 3.0)
    ratio = speed["ratio"]

    sec.values = {
        "first_paint_seconds": first_paint,
        "first_paint_goal": FIRST_PAINT_GOAL,
        "first_paint_pass": first_paint <= FIRST_PAINT_GOAL,
        "ui_key_latency_p50_ms": keys["p50"],
        "ui_key_latency_p95_ms": keys["p95"],
        "ui_key_latency_goal_ms": P95_GOAL_MS,
        "ui_key_latency_pass": keys["p95"] < P95_GOAL_MS,
        "ui_train_throughput_ratio": None if ratio is None else round(ratio, 3),
        "ui_train_throughput_goal": THROUGHPUT_GOAL,
        "ui_train_throughput_pass": ratio is not None and ratio >= THROUGHPUT_GOAL,
        "ui_driver": "real pseudo-terminal (bench/measure.py, 120x40 pty), not Textual's headless harness",
        "ui_detail": {"measure": result, "first_paints": paints, "train_speed": speed},
    }
    sec.rows += [
        Row("first paint (cold start, pty)", f"{first_paint:.2f} s", f"<= {FIRST_PAINT_GOAL:g} s",
            first_paint <= FIRST_PAINT_GOAL, f"median of {len(paints)}; process start to the Build pane's frame"),
        Row("key to repaint while training, p95", f"{keys['p95']:.0f} ms", f"< {P95_GOAL_MS:g} ms",
            keys["p95"] < P95_GOAL_MS, f"p50 {keys['p50']:.0f} ms, max {keys['max']:.0f} ms, {keys['samples']} pane switches; "
            + ", ".join(f"{pane} p50 {p['p50']:.0f}/p95 {p['p95']:.0f}" for pane, p in keys["per_pane"].items())),
    ]
    if ratio is None:
        sec.rows.append(Row("training speed in the lab / headless", "n/a", f">= {THROUGHPUT_GOAL}", False,
                            "no complete measurement windows"))
    else:
        lab_med = statistics.median(r for r in speed["lab_steps_per_s"] if r == r)
        head_med = statistics.median(r for r in speed["headless_steps_per_s"] if r == r)
        sec.rows.append(
            Row("training speed in the lab / headless", f"{ratio:.2f}x", f">= {THROUGHPUT_GOAL}",
                ratio >= THROUGHPUT_GOAL,
                f"Train pane shown, no keys; {len(speed['ratios'])} alternating {speed['window_s']:g} s windows "
                f"(range {min(speed['ratios']):.2f}-{max(speed['ratios']):.2f}); lab {lab_med:.1f} vs headless "
                f"{head_med:.1f} steps/s (copy preset, 1 training thread)")
        )
    return sec
