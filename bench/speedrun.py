"""Time to target with the speedrun's recipe: Muon, the model options, nanoGPT's recipe.

``python -m bench.speedrun charlm|presets|mfu|steps [--cap S] [--rounds N] [--target L]``

- ``charlm``: the char-lm preset to a fixed validation loss with the lab's
  default recipe (as shipped), with Muon, and with nanoGPT's AdamW recipe for
  its shakespeare-char model (lr 1e-3, betas 0.9/0.99, weight decay 0.1,
  dropout 0.2, batch 64, warmup 100, cosine to a tenth over 5000 steps) at the
  same model size (the preset's model, same task and windows: only the recipe
  differs);
- ``presets``: copy, reverse, sort and addition to their target accuracy, the
  lab's model with each recipe variant (``VARIANTS``) and ``nn.Transformer``
  (``bench.reference``) with the preset's recipe, through the same loop;
- ``mfu``: the char-lm preset's training MFU (training/mfu.py), lab and reference;
- ``steps``: one optimizer step of the addition and char-lm models (the same
  fixed gradients each time): the lab's Muon (``training/muon.py``, in the dtype
  it picks for this CPU, and forced to float32 and to bfloat16), ``torch.optim.Muon``
  in the same groups, and the lab's AdamW; alternated, median per step.

``charlm --seeds 0,1,2`` runs one round per seed (the run's ``train.seed``: its
initialisation and its batches), the order reversed every other round;
``--contenders lab,lab+muon`` picks among nanoGPT's, the lab's and the lab's with Muon
(``lab+muon@0.04``: with ``train.muon_lr`` 0.04).

Runs alternate within a round (A B C, then C B A in the next) so that, on a
machine others share, each contender sees the same load on average; the
figures reported are per-round ratios of wall seconds to the target, and their
median. Wall seconds include evaluations (every contender evaluates alike).
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import statistics
import time
from typing import Any

import torch

from bench.reference import build_reference
from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.presets import load_preset
from tui_lab.core.training.muon import Muon, ns_dtype
from tui_lab.core.training.optimizers import make_muon_adamw
from tui_lab.core.training.schedule import make_optimizer
from tui_lab.core.training.train import EvalEvent, OptimizerEvent, StepEvent, TrainingRun

NANOGPT: dict[str, object] = {
    "train.lr": 1e-3, "train.betas": [0.9, 0.99], "train.weight_decay": 0.1, "model.dropout": 0.2,
    "train.batch_size": 64, "train.warmup_steps": 100, "train.schedule": "cosine", "train.min_lr_ratio": 0.1,
    "train.decay_over": "steps", "train.steps": 5000, "train.eps": 1e-8, "train.max_seconds": None,
}
OPTIONS: dict[str, object] = {"model.activation": "relu2", "model.qk_norm": "head", "model.zero_init_proj": True}
VARIANTS: dict[str, dict[str, object]] = {
    "adamw": {"train.optimizer": "adamw"},
    "adamw+options": {"train.optimizer": "adamw", **OPTIONS},
    "adamw+qk_norm": {"train.optimizer": "adamw", "model.qk_norm": "head"},
    "adamw-qk_norm": {"train.optimizer": "adamw", "model.qk_norm": "none"},
    "muon": {"train.optimizer": "muon"},
    "muon+options": {"train.optimizer": "muon", **OPTIONS},
}


def run_to(config: LabConfig, cap_s: float, *, val_loss: float | None = None,
           reference: bool = False) -> dict[str, Any]:
    """Train until the preset's target accuracy (or ``val_loss``), its steps or ``cap_s``."""
    kwargs: dict[str, Any] = {"model_factory": build_reference} if reference else {}
    run = TrainingRun(config, None, **kwargs)
    start = time.perf_counter()
    hit: dict[str, float] = {}
    mfus: list[float] = []

    def on_event(event: object) -> None:
        now = time.perf_counter() - start
        if isinstance(event, EvalEvent) and val_loss is not None and event.val_loss <= val_loss and not hit:
            hit.update(seconds=now, step=event.step, train_seconds=run.elapsed)
            run.stop()
        if isinstance(event, OptimizerEvent) and event.mfu is not None and event.step > 20:
            mfus.append(event.mfu)
        if isinstance(event, StepEvent) and now > cap_s:
            run.stop()

    run.on_event = on_event
    summary = run.run()
    wall = time.perf_counter() - start
    if val_loss is None and summary["reason"] == "target":
        hit.update(seconds=wall, step=run.step, train_seconds=run.elapsed)
    return {
        "reached": bool(hit), "seconds": round(hit.get("seconds", wall), 2), "steps": int(hit.get("step", run.step)),
        "train_seconds": round(hit.get("train_seconds", run.elapsed), 2), "seed": config.train.seed,
        "load": round(os.getloadavg()[0], 2),
        "val_loss": summary["val_loss"], "accuracy": summary["exact_match"],
        "mfu": round(statistics.median(mfus), 4) if mfus else None, "tokens_per_s": summary["tokens_per_s"],
    }


def alternate(contenders: dict[str, tuple[LabConfig, bool]], rounds: int, cap_s: float,
              val_loss: float | None = None, seeds: list[int] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each contender ``rounds`` times (or once per seed of ``seeds``: ``train.seed``),
    the order reversed every other round."""
    names = list(contenders)
    out: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(len(seeds) if seeds else rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            config, reference = contenders[name]
            if seeds:
                config = config.with_values({"train.seed": seeds[r]})
            result = run_to(config, cap_s, val_loss=val_loss, reference=reference)
            out[name].append(result)
            print(json.dumps({"round": r, "contender": name, **result}), flush=True)
    return out


def _ratios(results: dict[str, list[dict[str, Any]]], base: str) -> dict[str, float | None]:
    """Median over rounds of base's seconds over each contender's (> 1: the contender is faster)."""
    out: dict[str, float | None] = {}
    for name, runs in results.items():
        pairs = [b["seconds"] / c["seconds"] for b, c in zip(results[base], runs, strict=True)
                 if b["reached"] and c["reached"]]
        out[name] = round(statistics.median(pairs), 3) if pairs else None
    return out


def _medians(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Per contender: the median wall seconds, training seconds and steps of the runs that reached."""
    out: dict[str, dict[str, float | None]] = {}
    for name, runs in results.items():
        hit = [r for r in runs if r["reached"]]
        out[name] = {key: (statistics.median(r[key] for r in hit) if len(hit) == len(runs) else None)
                     for key in ("seconds", "train_seconds", "steps")}
    return out


def charlm(rounds: int, cap_s: float, target: float, threads: int, *, eval_every: int = 50,
           names: list[str] | None = None, seeds: list[int] | None = None) -> dict[str, Any]:
    base = load_preset("char-lm").with_values({"train.eval_every": eval_every, "train.threads": threads})
    every = {
        "nanogpt-adamw": (base.with_values(NANOGPT), False),
        "lab": (base, False),
        "lab+muon": (base.with_values({"train.optimizer": "muon"}), False),
    }
    for name in names or []:  # lab+muon@0.04: the lab with Muon at train.muon_lr 0.04
        if name.startswith("lab+muon@"):
            every[name] = (base.with_values({"train.optimizer": "muon", "train.muon_lr": float(name[9:])}), False)
    contenders = {n: every[n] for n in (names or list(every))}
    results = alternate(contenders, rounds, cap_s, val_loss=target, seeds=seeds)
    first = next(iter(contenders))
    return {"target_val_loss": target, "results": results, "medians": _medians(results),
            f"speedup_vs_{first}": _ratios(results, first)}


def _timed_optimizers(base: LabConfig) -> dict[str, torch.optim.Optimizer]:
    """Each contender's optimizer over its own copy of the preset's model, fixed gradients set."""
    run = TrainingRun(base, None)
    muon = base.with_values({"train.optimizer": "muon"}).train
    makers: dict[str, Any] = {
        "adamw": lambda m: make_optimizer(m, base.with_values({"train.optimizer": "adamw"}).train),
        "lab-muon": lambda m: make_muon_adamw(m, muon),
        "lab-muon-fp32": lambda m: make_muon_adamw(m, muon, functools.partial(Muon, dtype=torch.float32)),
        "lab-muon-bf16": lambda m: make_muon_adamw(m, muon, functools.partial(Muon, dtype=torch.bfloat16)),
        "torch.optim.Muon": lambda m: make_muon_adamw(m, muon, torch.optim.Muon),
    }
    out: dict[str, torch.optim.Optimizer] = {}
    for name, make in makers.items():
        model = copy.deepcopy(run.model)
        gen = torch.Generator().manual_seed(0)
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=gen) * 1e-2
        out[name] = make(model)
        out[name].step()  # the state made before timing
    return out


def step_times(names: list[str], rounds: int, steps: int, threads: int) -> dict[str, Any]:
    """Median milliseconds per optimizer step, contenders alternated; ratios to AdamW and to torch's Muon."""
    out: dict[str, Any] = {"threads": threads, "ns_dtype": str(ns_dtype(torch.device("cpu")))}
    for name in names:
        optimizers = _timed_optimizers(load_preset(name).with_values({"train.threads": threads}))
        torch.set_num_threads(threads)
        times: dict[str, list[float]] = {k: [] for k in optimizers}
        order = list(optimizers)
        for r in range(rounds):
            for k in order if r % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                for _ in range(steps):
                    optimizers[k].step()
                times[k].append((time.perf_counter() - start) / steps * 1e3)
        ms = {k: round(statistics.median(v), 3) for k, v in times.items()}
        out[name] = {"ms_per_step": ms, "load": round(os.getloadavg()[0], 2),
                     "vs_adamw": {k: round(v / ms["adamw"], 2) for k, v in ms.items()},
                     "torch_muon_over": {k: round(ms["torch.optim.Muon"] / v, 2) for k, v in ms.items()}}
        print(json.dumps({name: out[name]}), flush=True)
    return out


def presets(names: list[str], variants: list[str], rounds: int, cap_s: float, threads: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        base = load_preset(name).with_values({"train.threads": threads})
        contenders: dict[str, tuple[LabConfig, bool]] = {"nn.Transformer": (base, True)}
        contenders.update({v: (base.with_values(VARIANTS[v]), False) for v in variants})
        results = alternate(contenders, rounds, cap_s)
        out[name] = {"results": results, "speedup_vs_torch": _ratios(results, "nn.Transformer")}
    return out


def mfu_of_charlm(seconds: float, threads: int) -> dict[str, Any]:
    base = load_preset("char-lm").with_values({"train.threads": threads, "train.eval_every": 10**6,
                                               "model.positional": "learned", "train.history": False})
    lab = run_to(base, seconds)
    ref = run_to(base, seconds, reference=True)
    return {"lab": lab, "nn.Transformer": ref, "threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("charlm", "presets", "mfu", "steps"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cap", type=float, default=300.0, help="wall seconds a run may take at most")
    parser.add_argument("--target", type=float, default=2.0, help="charlm: the validation loss to reach")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--presets", default="copy,reverse,sort,addition")
    parser.add_argument("--variants", default="adamw,adamw+options,muon+options")
    parser.add_argument("--seeds", default="", help="charlm: one round per train.seed (0,1,2)")
    parser.add_argument("--contenders", default="",
                        help="charlm: nanogpt-adamw,lab,lab+muon (all); lab+muon@R: Muon at train.muon_lr R")
    parser.add_argument("--eval-every", type=int, default=50, help="charlm: steps between validations")
    parser.add_argument("--steps", type=int, default=20, help="steps: optimizer steps per timing")
    args = parser.parse_args()
    if args.what == "charlm":
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
        names = args.contenders.split(",") if args.contenders else None
        result = charlm(args.rounds, args.cap, args.target, args.threads, eval_every=args.eval_every,
                        names=names, seeds=seeds)
    elif args.what == "steps":
        result = step_times(["addition", "char-lm"], args.rounds, args.steps, args.threads)
    elif args.what == "presets":
        result = presets(args.presets.split(","), args.variants.split(","), args.rounds, args.cap, args.threads)
    else:
        result = mfu_of_charlm(args.cap, args.threads)
    print(json.dumps({"summary": result}, default=str), flush=True)


if __name__ == "__main__":
    main()
