"""The ``probe``/``das`` items: probes at every layer of a run (goal 10 s) and the history
heatmap over 10 snapshots (goal 60 s), and what the addition run shows.

    .venv/bin/python -m bench.probes [--run DIR] [--train-seconds S] [--threads N]

1. The shipped ``addition`` preset is trained as ``tfx-lab train --preset addition`` does,
   with a snapshot every 150 steps (``train.history_every: 150``; its time is not
   counted), unless ``--run`` names an addition run with history.
2. ``tfx-lab probe --run R --variable carry --json``, end to end in this process (opening
   the run, 1,000 examples, every layer and position class with its shuffled-label
   control). Goal: at most 10 s.
3. ``tfx-lab probe ... --history``: the probe heatmap over 10 snapshots; and ``tfx-lab das
   --run R --variable carry --layer 1 --position "column 1" --history``: DAS with its
   controls at one layer plus DAS at every layer of every snapshot, i.e. both heatmaps.
   Goal: the history heatmap in at most 60 s.

Wall seconds and this process's CPU seconds are both reported: on a machine shared by
other work the wall time is what a user waits, the CPU time what the work costs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Row, Section

PROBE_GOAL_S = 10.0
HISTORY_GOAL_S = 60.0
HISTORY_EVERY = 150


def _tfx(*args: str) -> tuple[dict[str, Any], float, float]:
    """``tfx-lab ARGS --json`` in this process: its JSON, wall seconds and CPU seconds."""
    from tui_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*args, "--json"])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if rc != 0:
        raise RuntimeError(f"tfx-lab {' '.join(args)}: exit {rc}: {err.getvalue().strip()}")
    return json.loads(out.getvalue().strip().splitlines()[-1]), wall, cpu


def _train(folder: Path, seconds: float) -> Path:
    """The addition preset with a snapshot every HISTORY_EVERY steps."""
    preset = folder / "addition-history.yaml"
    shipped = Path(__file__).resolve().parents[1] / "presets" / "addition.yaml"
    text = shipped.read_text().replace("train:\n", f"train:\n  history_every: {HISTORY_EVERY}\n", 1)
    preset.write_text(text)
    run = folder / "addition"
    _tfx("train", "--preset", str(preset), "--max-seconds", str(seconds), "--out", str(run))
    return run


def _grid(history: dict[str, Any], key: str) -> str:
    """A history grid as rows of values (one row per layer)."""
    rows = history[key]["values"]
    return " | ".join(" ".join("-" if v is None else f"{v:.2f}" for v in row) for row in rows)


def probes_bench(run: Path | None = None, train_seconds: float = 300.0) -> Section:
    section = Section("probes", "Probes and DAS on the addition run")
    load = os.getloadavg()[0]
    train_s = None
    if run is None:
        started = time.perf_counter()
        run = _train(Path(tempfile.mkdtemp(prefix="bench-probes-")), train_seconds)
        train_s = time.perf_counter() - started
    table, probe_s, probe_cpu = _tfx("probe", "--run", str(run), "--variable", "carry")
    hist, hist_s, hist_cpu = _tfx("probe", "--run", str(run), "--variable", "carry", "--history")
    das, das_s, das_cpu = _tfx("das", "--run", str(run), "--variable", "carry", "--layer", "1",
                               "--position", "column 1", "--history")
    history = hist["history"]
    section.values = {"load_1min": load, "train_s": train_s, "probe": [probe_s, probe_cpu],
                      "probe_history": [hist_s, hist_cpu], "das_history": [das_s, das_cpu],
                      "best": table["best"], "history": history, "das": {k: das[k] for k in
                                                                         ("iia", "controls", "full_swap", "pairs")},
                      "das_grid": das["history"]}
    best = table["best"]
    section.rows += [
        Row("addition run trained (not counted)", f"{train_s:.0f} s" if train_s else "given", "", None, str(run)),
        Row("probes at every layer and position (1,000 examples), end to end", f"{probe_s:.1f} s",
            f"<= {PROBE_GOAL_S:.0f} s", probe_s <= PROBE_GOAL_S, f"CPU {probe_cpu:.1f} s; load {load:.1f}"),
        Row("probe heatmap over the history", f"{hist_s:.1f} s", f"<= {HISTORY_GOAL_S:.0f} s",
            hist_s <= HISTORY_GOAL_S, f"CPU {hist_cpu:.1f} s; {len(history['steps'])} snapshots"),
        Row("probe and DAS heatmaps over the history (das --history)", f"{das_s:.1f} s",
            f"<= {HISTORY_GOAL_S:.0f} s", das_s <= HISTORY_GOAL_S, f"CPU {das_cpu:.1f} s"),
        Row("best probe", f"{best['accuracy']:.3f}", ">= 0.95", best["accuracy"] >= 0.95,
            f"layer {best['layer']} ({best['hook']}), {best['position']}, control {best['control']:.3f}"),
        Row("readable from step (probe >= 0.95, all positions)", str(history["readable_from"]), "", None,
            f"steps {history['steps']}: {_grid(history, 'probe')}"),
        Row("DAS IIA at layer 1, column 1 (controls)", f"{das['iia']:.3f}", "", None,
            f"random subspace {das['controls']['random_subspace']:.3f}, random labels "
            f"{das['controls']['random_labels']:.3f}, whole swap {das['full_swap']:.3f}"),
        Row("causal from step (DAS IIA >= 0.8, column 1)", str(das["history"]["causal_from"]), "", None,
            _grid(das["history"], "das")),
    ]
    return section


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=None, help="an addition run with history (default: train one)")
    p.add_argument("--train-seconds", type=float, default=300.0, help="seconds to train it (default 300)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own)")
    args = p.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    section = probes_bench(args.run, args.train_seconds)
    print(json.dumps({k: section.values[k] for k in ("load_1min", "train_s", "probe", "probe_history",
                                                     "das_history")}, indent=2))
    for row in section.rows:
        print(f"{row.item:<66} {row.value:>10} {row.goal:>8} {'' if row.ok is None else ('ok' if row.ok else 'MISSED')}"
              f"  {row.note}")


if __name__ == "__main__":
    main()
