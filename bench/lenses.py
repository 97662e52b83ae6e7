"""The ``lens`` item: a tuned lens for the char-lm preset (goal: 60 s), and what the lenses show.

    .venv/bin/python -m bench.lenses [--run DIR] [--train-seconds S]

1. The shipped ``char-lm`` preset is trained as ``tfx-lab train --preset char-lm
   --max-seconds S`` does (S = 90 by default: a short run; its time is not counted),
   unless ``--run`` names a char-lm run.
2. ``tfx-lab lens --run R --input TEXT --lens tuned --out DIR --json`` with the command's
   defaults (200 steps of 32 windows of 64 characters), timed from the command's start
   to its end: opening the run, fitting, saving, the readout and the scores on fresh
   batches all count. Goal: at most 60 s.
3. The same for the Jacobian lens (32 prompts) and the logit lens, side by side: per
   layer, the KL(output || layer) and the top-1 agreement on fresh batches of the run's
   text (4 batches of 32 windows), the fitted lens beside the logit lens.
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

GOAL_S = 60.0
INPUT = "def "  # a prompt of the run's own text (pydoc's help has Python code in it)


def _tfx(*args: str) -> tuple[dict[str, Any], float]:
    """``tfx-lab ARGS --json`` in this process: its JSON and its seconds."""
    from tui_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*args, "--json"])
    seconds = time.perf_counter() - started
    if rc != 0:
        raise RuntimeError(f"tfx-lab {' '.join(args)}: exit {rc}: {err.getvalue().strip()}")
    return json.loads(out.getvalue().strip().splitlines()[-1]), seconds


def lenses_bench(run: Path | None = None, train_seconds: float = 90.0) -> Section:
    section = Section("lenses", "Tuned and Jacobian lenses on a char-lm run")
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-lenses-"))
    train_s = None
    if run is None:
        run = tmp / "char-lm"
        _, train_s = _tfx("train", "--preset", "char-lm", "--max-seconds", str(train_seconds), "--out", str(run))
    tuned, tuned_s = _tfx("lens", "--run", str(run), "--input", INPUT, "--lens", "tuned", "--out", str(tmp / "tuned"))
    jac, jac_s = _tfx("lens", "--run", str(run), "--input", INPUT, "--lens", "jacobian", "--out", str(tmp / "jac"))
    _, logit_s = _tfx("lens", "--run", str(run), "--input", INPUT)
    reopened, reopen_s = _tfx("lens", "--run", str(run), "--input", INPUT, "--lens", "tuned",
                              "--lens-file", str(tmp / "tuned"))
    section.values = {"load_1min": load, "train_s": train_s, "tuned_s": tuned_s, "jacobian_s": jac_s,
                      "logit_s": logit_s, "reopen_s": reopen_s, "tuned": tuned, "jacobian": jac,
                      "reopened_output": reopened["output"]}
    section.rows += [
        Row("char-lm run trained (not counted)", f"{train_s:.0f} s" if train_s else "given", "", None, str(run)),
        Row("tuned lens: tfx-lab lens --lens tuned (200 steps), end to end", f"{tuned_s:.1f} s",
            f"<= {GOAL_S:.0f} s", tuned_s <= GOAL_S,
            f"loss {tuned['fit']['loss_first']:.3f} -> {tuned['fit']['loss_last']:.3f}; load {load:.1f}"),
        Row("Jacobian lens (32 prompts), end to end", f"{jac_s:.1f} s", "", None,
            f"{jac_s / tuned_s:.2f}x the tuned lens"),
        Row("logit lens alone / tuned lens reopened", f"{logit_s:.1f} s / {reopen_s:.1f} s", "", None,
            f"{tuned_s / reopen_s:.1f}x to fit than to reopen"),
    ]
    for mine, theirs in zip(tuned["held_out"], jac["held_out"], strict=True):
        section.rows.append(Row(
            f"{mine['layer']}: KL logit / tuned / Jacobian",
            f"{mine['logit_kl']:.3f} / {mine['kl']:.3f} / {theirs['kl']:.3f}", "", None,
            f"top-1 {mine['logit_agreement']:.0%} / {mine['agreement']:.0%} / {theirs['agreement']:.0%}"))
    return section


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=None, help="a char-lm run (default: train one)")
    p.add_argument("--train-seconds", type=float, default=90.0, help="seconds to train it (default 90)")
    args = p.parse_args()
    section = lenses_bench(args.run, args.train_seconds)
    print(json.dumps({k: v for k, v in section.values.items() if k not in ("tuned", "jacobian")}, indent=2))
    for row in section.rows:
        print(f"{row.item:<62} {row.value:>24} {row.goal:>8} {'' if row.ok is None else ('ok' if row.ok else 'MISSED')}"
              f"  {row.note}")


if __name__ == "__main__":
    main()
