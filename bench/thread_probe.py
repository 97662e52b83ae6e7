"""How a small training step scales with torch's threads on this machine, right now.

Apart from ``bench.common`` because it trains (``bench.throughput``'s step), and
``bench.throughput`` itself builds on ``bench.common``.
"""

from __future__ import annotations

import random
import time
from typing import Any

import torch

from bench.throughput import make_train_step
from tui_lab.core.config.presets import load_preset
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task


def thread_probe(threads: int, rounds: int = 3, steps: int = 4) -> dict[str, Any]:
    """Steps/s of a small training step at ``threads`` and at 1 thread, alternated.

    On a machine whose cores are busy with other processes, torch's OpenMP
    threads spin at every barrier waiting for a descheduled peer, and N threads
    can be several times *slower* than one. The probe tells such a machine apart.
    """
    before = torch.get_num_threads()
    config = load_preset("copy")
    task = make_task(config.task)
    rng = random.Random(0)
    batches = [task.batch(rng, config.train.batch_size, "encoder-decoder") for _ in range(steps)]
    torch.manual_seed(0)
    step = make_train_step(build_model(config.model, len(task.vocab)), config)
    rates: dict[int, list[float]] = {threads: [], 1: []}
    try:
        for r in range(rounds):
            for n in (threads, 1) if r % 2 == 0 else (1, threads):
                torch.set_num_threads(n)
                step(batches[0])
                t0 = time.perf_counter()
                for b in batches:
                    step(b)
                rates[n].append(steps / (time.perf_counter() - t0))
    finally:
        torch.set_num_threads(before)
    many, one = max(rates[threads]), max(rates[1])
    return {"threads": threads, "steps_per_s": round(many, 2), "steps_per_s_1_thread": round(one, 2),
            "speedup_vs_1_thread": round(many / one, 3)}
