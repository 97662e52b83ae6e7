"""The ``time_to_target`` item: seconds to the target accuracy for copy, reverse, sort and addition.

A headless ``TrainingRun`` on the shipped preset (its seed, its
``train.target_accuracy``, evaluation on ``train.eval_examples`` = 500 held-out
examples every ``train.eval_every`` steps), exactly what
``tfx-lab train --preset P`` runs, minus the run folder. The same loop then
trains the ``torch.nn.Transformer`` reference (``bench.reference``) through
``TrainingRun(model_factory=...)`` at the same settings.

Reported per task and model:

- ``seconds``: wall-clock seconds of ``run()``, evaluations included (what a
  user waits for); this is ``copy_seconds`` etc.;
- ``train_seconds``: ``TrainingRun.elapsed``, optimisation steps only. The
  reference decodes without a KV cache (it recomputes the target every step),
  so its evaluations are slower: compare the models on train seconds and steps;
- ``steps`` and the accuracy reached.

Caps: each run stops at 1.5x its goal (wall clock) with ``--quick`` and at 3x
otherwise. With ``--quick`` every run also stops at the whole benchmark's
overall deadline, and only the copy reference is certain to run: the other
references run after all lab runs, while the deadline leaves room. A capped run
says so (``reached: false``, ``reason: cap``), unless its last evaluation, made
when it stopped, met the target.

Over seeds (``python -m bench.time_to_target --seeds 0,1,2,3 [--presets
copy,reverse,sort,addition] [--cap S] [--threads N] [--variant k=v,...]``):
the step count to a 99% threshold moves by +-40% with float rounding alone
(bench/RESULTS.md), so one seed says little. Each seed (``train.seed``: the
initialisation and the batches) trains the lab's model and ``nn.Transformer``
with the preset's recipe back to back, their order alternated from one pair
to the next so that a machine's load hits both alike; per preset and
contender it reports each seed's seconds, training seconds and steps, their
medians (a run not reached counts as infinitely slow), the ratio of the
medians (``nn.Transformer``'s over the lab's: above 1 the lab is faster) and
the load average around each run. The goal, the lab no slower, is judged on
the medians of wall seconds. ``--variant model.qk_norm=head`` adds the lab
with that change as a third contender (judge a recipe change on seeds the
comparison does not use).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from typing import Any

import torch
import yaml

from bench.common import Row, Section
from bench.reference import build_reference
from tui_lab.core.config.presets import load_preset
from tui_lab.core.training.train import EvalEvent, StepEvent, TrainingRun

GOALS = {"copy": 30.0, "reverse": 60.0, "sort": 60.0, "addition": 180.0}
QUICK_CAP = 1.5
FULL_CAP = 3.0


def train_to_target(
    preset: str, cap_s: float | None, reference: bool = False, threads: int | None = None,
    values: dict[str, object] | None = None,
) -> dict[str, Any]:
    """Train ``preset`` until its target, its step count or ``cap_s`` wall seconds.

    ``threads`` overrides ``train.threads`` (0 in the presets: the lab's default);
    ``values`` any other setting (``{"train.seed": 1}``).
    """
    config = load_preset(preset)
    if threads:
        config = config.with_values({"train.threads": threads})
    if values:
        config = config.with_values(values)
    kwargs: dict[str, Any] = {"model_factory": build_reference} if reference else {}
    run = TrainingRun(config, None, **kwargs)
    threads = torch.get_num_threads()
    evals: list[tuple[int, float, float]] = []  # (step, wall s, accuracy)
    start = time.perf_counter()
    capped = False

    def on_event(event: Any) -> None:
        nonlocal capped
        if isinstance(event, EvalEvent) and event.exact_match is not None:
            evals.append((event.step, round(time.perf_counter() - start, 2), event.exact_match))
        if isinstance(event, StepEvent) and cap_s is not None and time.perf_counter() - start > cap_s:
            capped = True
            run.stop()

    run.on_event = on_event
    summary = run.run()
    wall = time.perf_counter() - start
    target = config.train.target_accuracy
    best = max((a for _, _, a in evals), default=None)
    reached = summary["reason"] == "target"
    seconds = wall
    # A capped run still evaluates once when it stops; if that meets the target, it counts.
    if not reached and target is not None:
        hit = next(((s, t) for s, t, a in evals if a >= target), None)
        if hit is not None:
            reached, seconds = True, hit[1]
    return {
        "reached": reached,
        "reason": "cap" if capped and summary["reason"] != "target" else summary["reason"],
        "seconds": round(seconds, 2),
        "train_seconds": round(run.elapsed, 2),
        "steps": run.step,
        "target": target,
        "accuracy": summary["exact_match"],
        "best_accuracy": best,
        "evals": evals,
        "threads": threads,
        "seed": config.train.seed,
    }


def time_to_target(quick: bool, deadline: float | None, threads: int | None = None) -> Section:
    """All four tasks for the lab and for the reference (see the module docstring for the order)."""
    sec = Section("time_to_target", "5. headless time to target accuracy (500 held-out examples)")
    lab: dict[str, dict[str, Any]] = {}
    ref: dict[str, dict[str, Any]] = {}
    # Each task's reference right after the lab's run, so the two see similar load.
    # With --quick: the copy reference first; the other references only after every
    # lab run, and only while the overall deadline leaves room for them.
    if quick:
        jobs = [("copy", False), ("copy", True), *[(t, False) for t in GOALS if t != "copy"]]
        jobs += [(t, True) for t in GOALS if t != "copy"]
    else:
        jobs = [(t, r) for t in GOALS for r in (False, True)]
    for task, is_ref in jobs:
        cap = GOALS[task] * (QUICK_CAP if quick else FULL_CAP)
        if deadline is not None:
            left = deadline - time.perf_counter()
            need = 10.0
            if is_ref and task != "copy":
                lab_run = lab.get(task, {})
                # Worth starting only if it can finish: about as long as the lab took, plus slack.
                need = min(cap, 1.5 * lab_run.get("seconds", cap) + 10)
            if left < need:
                (ref if is_ref else lab)[task] = {"skipped": "overall --quick time budget spent"}
                continue
            cap = min(cap, left)
        (ref if is_ref else lab)[task] = train_to_target(task, cap, reference=is_ref, threads=threads)

    for task, goal in GOALS.items():
        r = lab[task]
        key = f"{task}_seconds"
        if "skipped" in r:
            sec.values[key] = None
            sec.values[f"{task}_pass"] = False
            sec.rows.append(Row(f"{task}: seconds to target", "skipped", f"<= {goal:g} s", False, r["skipped"]))
            continue
        ok = r["reached"] and r["seconds"] <= goal
        sec.values[key] = r["seconds"] if r["reached"] else None
        sec.values[f"{task}_goal"] = goal
        sec.values[f"{task}_pass"] = ok
        sec.values[f"{task}_reached"] = r["reached"]
        sec.values[f"{task}_lab"] = r
        shown = f"{r['seconds']:.1f} s" if r["reached"] else f"not reached ({r['reason']})"
        note = (
            f"{r['steps']} steps, train-only {r['train_seconds']:.1f} s, "
            f"acc {_pct(r['accuracy'])} (target {_pct(r['target'])})"
        )
        rr = ref.get(task)
        if rr is not None and "skipped" not in rr:
            sec.values[f"{task}_torch"] = rr
            sec.values[f"{task}_torch_seconds"] = rr["seconds"] if rr["reached"] else None
            ref_shown = f"{rr['seconds']:.1f} s" if rr["reached"] else f"not reached ({rr['reason']})"
            note += (
                f"; nn.Transformer: {ref_shown}, {rr['steps']} steps, train-only {rr['train_seconds']:.1f} s, "
                f"acc {_pct(rr['accuracy'])}"
            )
            if rr["reached"] and r["reached"]:
                sec.values[f"{task}_train_seconds_vs_torch"] = round(rr["train_seconds"] / r["train_seconds"], 3)
                note += " (one seed: steps move +-40% with rounding; --seeds in this module for medians)"
        elif rr is not None:
            note += f"; nn.Transformer: skipped ({rr['skipped']})"
        else:
            note += "; nn.Transformer: not run"
        sec.rows.append(Row(f"{task}: seconds to target", shown, f"<= {goal:g} s", ok, note))
    return sec


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _median(values: list[float]) -> float | None:
    m = statistics.median(values)
    return None if math.isinf(m) else round(m, 2)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each seed's figures and their medians (a run that missed the target counts as infinite)."""
    inf = math.inf
    return {
        "seeds": [r["seed"] for r in runs],
        "seconds": [r["seconds"] if r["reached"] else None for r in runs],
        "train_seconds": [r["train_seconds"] if r["reached"] else None for r in runs],
        "steps": [r["steps"] if r["reached"] else None for r in runs],
        "not_reached": sum(not r["reached"] for r in runs),
        "median_seconds": _median([r["seconds"] if r["reached"] else inf for r in runs]),
        "median_train_seconds": _median([r["train_seconds"] if r["reached"] else inf for r in runs]),
        "median_steps": _median([r["steps"] if r["reached"] else inf for r in runs]),
    }


def _ratio(base: dict[str, Any], other: dict[str, Any], key: str) -> float | None:
    """base's median over other's (above 1: other is faster)."""
    if base[key] is None or other[key] is None:
        return None
    return round(base[key] / other[key], 3)


def over_seeds(presets: list[str], seeds: list[int], cap_s: float, threads: int,
               variant: dict[str, object] | None = None) -> dict[str, Any]:
    """Every preset and seed: the lab and nn.Transformer (and the lab with ``variant``), alternated."""
    contenders: dict[str, tuple[bool, dict[str, object]]] = {"lab": (False, {}), "nn.Transformer": (True, {})}
    if variant:
        contenders["lab+variant"] = (False, dict(variant))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {p: {c: [] for c in contenders} for p in presets}
    pair = 0
    for seed in seeds:  # seed-major: a cut-short sitting still has every preset
        for preset in presets:
            names = list(contenders) if pair % 2 == 0 else list(contenders)[::-1]
            pair += 1
            for name in names:
                reference, values = contenders[name]
                load_before = os.getloadavg()[0]
                result = train_to_target(preset, cap_s, reference=reference, threads=threads,
                                         values={"train.seed": seed, **values})
                result.pop("evals")
                result["load"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
                runs[preset][name].append(result)
                print(json.dumps({"preset": preset, "contender": name, **result}), flush=True)
    out: dict[str, Any] = {}
    for preset, by_name in runs.items():
        summaries = {name: _summary(r) for name, r in by_name.items()}
        loads = [x for r in by_name.values() for run in r for x in run["load"]]
        lab, ref = summaries["lab"], summaries["nn.Transformer"]
        out[preset] = {
            **summaries,
            "nn_over_lab_median_seconds": _ratio(ref, lab, "median_seconds"),
            "nn_over_lab_median_train_seconds": _ratio(ref, lab, "median_train_seconds"),
            "nn_over_lab_median_steps": _ratio(ref, lab, "median_steps"),
            "lab_no_slower": lab["median_seconds"] is not None and (
                ref["median_seconds"] is None or lab["median_seconds"] <= ref["median_seconds"]),
            "load_average": [min(loads), max(loads)] if loads else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Time to target over seeds: the lab vs nn.Transformer.")
    parser.add_argument("--seeds", default="0,1,2,3", help="train.seed values, one pair of runs each")
    parser.add_argument("--presets", default=",".join(GOALS))
    parser.add_argument("--cap", type=float, default=300.0, help="wall seconds a run may take at most")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variant", default="", help="k=v,... : the lab with these values as a third contender")
    args = parser.parse_args()
    variant = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.variant.split(",") if kv)}
    result = over_seeds(args.presets.split(","), [int(x) for x in args.seeds.split(",")], args.cap,
                        args.threads, variant or None)
    print(json.dumps({"summary": result}), flush=True)


if __name__ == "__main__":
    main()
