"""The ``sweep_parallel_speedup`` item of ``python -m bench``: a sweep's K processes at work.

Four runs of the copy preset (seeds 0-3, a fixed number of steps and no early
stop, so both ways do the same work) are run as ``tfx-lab sweep --parallel 2``
and as ``--parallel 1`` (one after another), each a fresh ``tfx-lab sweep``
process timed from start to exit: interpreter and torch start-up of every run
count, as they do for a user. The orders alternate between rounds (1 2, 2 1,
...) because speed on a shared machine drifts; each round's ratio is kept and
the median reported. Goal: at least 1.6x on 2 cores.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row, Section

GOAL = 1.6
RUNS = 4


def _spec(folder: Path, steps: int) -> Path:
    spec = folder / "copy4.yaml"
    spec.write_text(
        "preset: copy\n"
        f"seeds: {RUNS}\n"
        f"steps: {steps}\n"
        "set:\n"
        "  train.target_accuracy: null  # no early stop: every run does the same steps\n"
        "  train.device: cpu\n"
    )
    return spec


def _time_sweep(spec: Path, out: Path, parallel: int) -> float:
    """Seconds for one ``tfx-lab sweep`` of the spec, start to exit."""
    root = Path(__file__).resolve().parents[1]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tui_lab.cli", "sweep", str(spec), "--parallel", str(parallel),
         "--out", str(out), "--json"],
        capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
        timeout=1800,
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"sweep --parallel {parallel} failed: {proc.stderr.strip()[-300:]}")
    return seconds


def sweep_parallel_speedup(quick: bool) -> Section:
    sec = Section("sweep_parallel_speedup", f"sweep: {RUNS} copy runs, --parallel 2 vs one after another")
    steps = 150 if quick else 300
    rounds = 1 if quick else 2
    ratios, serial, parallel = [], [], []
    with tempfile.TemporaryDirectory(prefix="tfx-sweep-bench-") as tmp:
        folder = Path(tmp)
        spec = _spec(folder, steps)
        for r in range(rounds):
            order = (1, 2) if r % 2 == 0 else (2, 1)
            took = {k: _time_sweep(spec, folder / f"r{r}-p{k}", k) for k in order}
            serial.append(took[1])
            parallel.append(took[2])
            ratios.append(took[1] / took[2])
    ratio = statistics.median(ratios)
    sec.values = {
        "sweep_parallel_speedup": round(ratio, 3),
        "sweep_serial_s": [round(s, 1) for s in serial],
        "sweep_parallel2_s": [round(s, 1) for s in parallel],
        "sweep_steps_per_run": steps,
        "cores": os.cpu_count(),
    }
    sec.rows.append(Row(
        "--parallel 2 vs 1 (wall clock)", f"{ratio:.2f}x", f">= {GOAL}x", ratio >= GOAL,
        f"{RUNS} runs x {steps} steps; serial {statistics.median(serial):.1f} s, "
        f"parallel {statistics.median(parallel):.1f} s; median of {rounds} round(s), orders alternated",
    ))
    return sec
