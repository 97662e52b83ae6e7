"""The ``crosscoder`` item: a crosscoder over two snapshots of the induction run (goal: 60 s).

    .venv/bin/python -m bench.crosscoder [--run DIR]

1. The shipped ``induction`` preset is trained as ``tfx-lab train --preset induction``
   does (history on: snapshots at 1, 2, 4, ... and every evaluation), unless
   ``--run`` names such a run; its time is reported apart.
2. Two snapshots are picked as a user would from the run's curve: the last one
   at or before the last evaluation under 20% accuracy on the repeat (before the
   induction bump) and the last snapshot.
3. ``tfx-lab crosscoder train --run R --steps A,B`` with the command's defaults
   (256 features, 2,000 steps of 256 rows, 40,000 rows collected at each source,
   the residual stream after the last block), timed from the command's start to
   its end: opening both snapshots and collecting their activations count.
   Goal: at most 60 s.
4. What the features are: each class's activation on the induction sequences'
   repeated half (after its first token) over its activation elsewhere
   ("repeat selectivity"), on 400 fresh sequences whose prefix lengths are known.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench.common import Row, Section

GOAL_S = 60.0
BEFORE = 0.2  # accuracy on the repeat under which the bump has not happened


def _tfx(*args: str) -> dict[str, Any]:
    from tui_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*args, "--json"])
    if rc != 0:
        raise RuntimeError(f"tfx-lab {' '.join(args)}: exit {rc}: {err.getvalue().strip()}")
    result: dict[str, Any] = json.loads(out.getvalue().strip().splitlines()[-1])
    return result


def pick_steps(run: Path) -> tuple[int, int]:
    """(a snapshot before the bump, the last snapshot), from the run's evaluations."""
    from tui_lab.core.runs.snapshots import list_snapshots

    have = list_snapshots(run)
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    low = [int(e["step"]) for e in evals if float(e.get("exact_match", e.get("accuracy", 1.0))) < BEFORE]
    cut = max(low) if low else have[0]
    early = max([s for s in have if s <= cut] or have[:1])
    return early, have[-1]


def selectivity(folder: Path, n: int = 400) -> dict[str, dict[str, float]]:
    """Per class: features, median repeat selectivity, and how many are over 2x."""
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.sae.crosscoder_folder import load_crosscoder
    from tui_lab.core.sae.crosscoder_norms import classify, relative_norms
    from tui_lab.core.sae.crosscoder_sources import collect
    from tui_lab.core.tasks.induction import InductionTask

    cc, fired = load_crosscoder(folder)
    models = [open_model(s.source, at_step=s.at_step) for s in cc.cfg.sources]
    task = models[0].task
    assert isinstance(task, InductionTask)
    seqs, lengths = task.sequences(random.Random(123), n)
    ids = seqs[:, :-1]
    with torch.no_grad():
        f = cc.encode(collect(models, ids, cc.cfg.hook))
    pos = torch.arange(ids.shape[1])[None] - lengths[:, None]  # position relative to the repeat's start
    rep = ((pos >= 1) & (pos < lengths[:, None])).reshape(-1)
    kinds = classify(relative_norms(cc.decoder_norms()), fired > 0)
    out = {}
    for kind in ("b_only", "a_only", "shared", "mixed"):
        idx = [i for i, k in enumerate(kinds) if k == kind]
        if idx:
            fk = f[:, idx]
            sel = fk[rep].mean(0) / fk[~rep].mean(0).clamp_min(1e-9)
            out[kind] = {"n": len(idx), "median": round(float(sel.median()), 2), "over_2x": int((sel > 2).sum())}
    return out


def crosscoder_bench(run: Path | None = None) -> Section:
    section = Section("crosscoder", "Crosscoder over two snapshots of the induction run (256 features)")
    with tempfile.TemporaryDirectory(prefix="tfx-bench-xc-") as tmp:
        root = Path(tmp)
        train_s = 0.0
        if run is None:
            from tui_lab.core.config.presets import load_preset
            from tui_lab.core.training.train import TrainingRun

            run = root / "induction"
            t0 = time.perf_counter()
            TrainingRun(load_preset("induction"), run).run()
            train_s = time.perf_counter() - t0
        early, last = pick_steps(run)
        t0 = time.perf_counter()
        got = _tfx("crosscoder", "train", "--run", str(run), "--steps", f"{early},{last}", "--out", str(root / "xc"))
        xc_s = time.perf_counter() - t0
        sel = selectivity(root / "xc")
    section.values = {"induction_train_s": round(train_s, 1), "steps": [early, last], "crosscoder_s": round(xc_s, 1),
                      "train_s": got["seconds"], "explained_variance": got["explained_variance"], "l0": got["l0"],
                      "counts": got["counts"], "repeat_selectivity": sel}
    counts = got["counts"]
    section.rows = [
        Row("induction preset trained (not counted)", f"{train_s:.0f} s" if train_s else "given", "", None, str(run)),
        Row(f"crosscoder: steps {early} and {last}, activations included", f"{xc_s:.1f} s", f"<= {GOAL_S:.0f} s",
            xc_s <= GOAL_S, f"training alone {got['seconds']:.1f} s; EV {got['explained_variance']:.3f}, "
            f"L0 {got['l0']:.1f}"),
        Row("features new at B / gone / shared / in between / dead",
            " / ".join(str(counts[k]) for k in ("b_only", "a_only", "shared", "mixed", "dead")), "", None,
            "relative decoder norm >= 0.9 / <= 0.1 / within 0.2 of 0.5"),
    ]
    for kind, s in sel.items():
        section.rows.append(Row(f"repeat selectivity, {kind}", f"median {s['median']:.2f}", "", None,
                                f"{s['over_2x']} of {s['n']} over 2x"))
    return section


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=None, help="an induction run with history (default: train one)")
    args = p.parse_args()
    section = crosscoder_bench(args.run)
    print(json.dumps(section.values, indent=2))
    for row in section.rows:
        print(f"{row.item:<60} {row.value:>22} {row.goal:>8} {'' if row.ok is None else ('ok' if row.ok else 'MISSED')}"
              f"  {row.note}")


if __name__ == "__main__":
    main()
