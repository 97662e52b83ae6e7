"""``fast_paths``: work the lab does on every step or keystroke, against the work beside it.

- batch generation: drawing one training batch, as a share of the training
  step it feeds (goal: at most 25%), for copy, addition and char-lm; the two
  alternate in windows so load on a shared machine hits both alike;
- the parameter report: a new config (built on the meta device) against
  building the same model for real on the CPU (goal: cheaper), and a config
  seen before (cached) against a new one (goal: at least 100x cheaper).

The tests only count operations (builds, draws); the speed lives here.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.common import Row, Section
from bench.throughput import make_train_step
from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.config.presets import load_preset
from tui_lab.core.model.models import build_model
from tui_lab.core.model.params import parameter_report
from tui_lab.core.tasks import make_task

BATCH_SHARE_GOAL = 0.25
CACHED_SPEEDUP_GOAL = 100.0


def _alternate(a: Callable[[], Any], b: Callable[[], Any], rounds: int, per_window: int) -> float:
    """Median over rounds of (time of ``a``) / (time of ``b``), timed in alternating windows."""
    ratios = []
    for r in range(rounds):
        spent = {}
        for name, fn in (("a", a), ("b", b)) if r % 2 == 0 else (("b", b), ("a", a)):
            t0 = time.perf_counter()
            for _ in range(per_window):
                fn()
            spent[name] = time.perf_counter() - t0
        ratios.append(spent["a"] / spent["b"])
    return statistics.median(ratios)


def _batch_share(preset: str, rounds: int) -> float:
    config = load_preset(preset).with_values({"train.device": "cpu"})
    task = make_task(config.task)
    arch = config.model.arch
    size = config.train.batch_size
    rng = random.Random(0)
    batch = task.batch(rng, size, arch)
    step = make_train_step(build_model(config.model, len(task.vocab)), config)
    step(batch)  # warm up
    return _alternate(lambda: task.batch(rng, size, arch), lambda: step(batch), rounds, 5)


def _report_config(i: int) -> ModelConfig:
    """The paper's base model with a width never asked about before (no cache hit)."""
    return ModelConfig(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6,
                       d_ff=2048 + i, max_len=512)


def fast_paths(quick: bool) -> Section:
    section = Section("fast_paths", "Per-step and per-keystroke work against the work beside it")
    rounds = 5 if quick else 11
    for preset in ("copy", "addition", "char-lm"):
        share = _batch_share(preset, rounds)
        section.values[f"batch_share_of_step_{preset}"] = share
        section.rows.append(Row(f"{preset}: one batch / one training step", f"{share:.2%}",
                                f"<= {BATCH_SHARE_GOAL:.0%}", share <= BATCH_SHARE_GOAL))
    vocab = 37000
    counter = iter(range(1, 10**6))
    cold = _alternate(lambda: parameter_report(_report_config(next(counter)), vocab),
                      lambda: build_model(_report_config(0), vocab), rounds, 1)
    seen = _report_config(0)
    parameter_report(seen, vocab)
    cached = _alternate(lambda: parameter_report(_report_config(next(counter)), vocab),
                        lambda: parameter_report(seen, vocab), rounds, 1)
    section.values["param_report_new_vs_real_build"] = cold
    section.values["param_report_cached_speedup"] = cached
    section.rows.append(Row("parameter report (new config) / real CPU build", f"{cold:.3f}x", "< 1x",
                            cold < 1.0, "paper base model, 37000-token vocabulary"))
    section.rows.append(Row("parameter report: new config / config seen before", f"{cached:.0f}x",
                            f">= {CACHED_SPEEDUP_GOAL:.0f}x", cached >= CACHED_SPEEDUP_GOAL))
    return section
