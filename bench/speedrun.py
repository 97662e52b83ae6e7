"""Time to target with the speedrun's recipe: Muon, the model options, nanoGPT's recipe.

``python -m bench.speedrun charlm|presets|mfu [--cap S] [--rounds N] [--target L]``

- ``charlm``: the char-lm preset to a fixed validation loss with the lab's
  default recipe (as shipped), with Muon, and with nanoGPT's AdamW recipe for
  its shakespeare-char model (lr 1e-3, betas 0.9/0.99, weight decay 0.1,
  dropout 0.2, batch 64, warmup 100, cosine to a tenth over 5000 steps) at the
  same model size (the preset's model, same task and windows: only the recipe
  differs);
- ``presets``: copy, reverse, sort and addition to their target accuracy, the
  lab's model with each recipe variant (``VARIANTS``) and ``nn.Transformer``
  (``bench.reference``) with the preset's recipe, through the same loop;
- ``mfu``: the char-lm preset's training MFU (training/mfu.py), lab and reference.

Runs alternate within a round (A B C, then C B A in the next) so that, on a
machine others share, each contender sees the same load on average; the
figures reported are per-round ratios of wall seconds to the target, and their
median. Wall seconds include evaluations (every contender evaluates alike).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from bench.reference import build_reference
from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.presets import load_preset
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
            hit.update(seconds=now, step=event.step)
            run.stop()
        if isinstance(event, OptimizerEvent) and event.mfu is not None and event.step > 20:
            mfus.append(event.mfu)
        if isinstance(event, StepEvent) and now > cap_s:
            run.stop()

    run.on_event = on_event
    summary = run.run()
    wall = time.perf_counter() - start
    if val_loss is None and summary["reason"] == "target":
        hit.update(seconds=wall, step=run.step)
    return {
        "reached": bool(hit), "seconds": round(hit.get("seconds", wall), 2), "steps": int(hit.get("step", run.step)),
        "val_loss": summary["val_loss"], "accuracy": summary["exact_match"],
        "mfu": round(statistics.median(mfus), 4) if mfus else None, "tokens_per_s": summary["tokens_per_s"],
    }


def alternate(contenders: dict[str, tuple[LabConfig, bool]], rounds: int, cap_s: float,
              val_loss: float | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each contender ``rounds`` times, the order reversed every other round."""
    names = list(contenders)
    out: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            config, reference = contenders[name]
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


def charlm(rounds: int, cap_s: float, target: float, threads: int) -> dict[str, Any]:
    base = load_preset("char-lm").with_values({"train.eval_every": 50, "train.threads": threads})
    contenders = {
        "nanogpt-adamw": (base.with_values(NANOGPT), False),
        "lab": (base, False),
        "lab+muon": (base.with_values({"train.optimizer": "muon"}), False),
    }
    results = alternate(contenders, rounds, cap_s, val_loss=target)
    return {"target_val_loss": target, "results": results, "speedup_vs_nanogpt": _ratios(results, "nanogpt-adamw")}


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
    parser.add_argument("what", choices=("charlm", "presets", "mfu"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cap", type=float, default=300.0, help="wall seconds a run may take at most")
    parser.add_argument("--target", type=float, default=2.0, help="charlm: the validation loss to reach")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--presets", default="copy,reverse,sort,addition")
    parser.add_argument("--variants", default="adamw,adamw+options,muon+options")
    args = parser.parse_args()
    if args.what == "charlm":
        result = charlm(args.rounds, args.cap, args.target, args.threads)
    elif args.what == "presets":
        result = presets(args.presets.split(","), args.variants.split(","), args.rounds, args.cap, args.threads)
    else:
        result = mfu_of_charlm(args.cap, args.threads)
    print(json.dumps({"summary": result}, default=str), flush=True)


if __name__ == "__main__":
    main()
