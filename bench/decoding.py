"""The ``kv_cache_speedup`` and ``capture_overhead`` items: the KV cache's gain, capture's cost.

Both use ``tui_lab.core.decoding.decode.generate``, the function the Decode pane calls,
on freshly initialised models (decoding speed does not depend on the weights;
char-lm never stops at EOS, so every run produces exactly ``NEW_TOKENS``).

3. ``kv_cache_speedup``: char-lm preset, 256 new tokens after a short prompt,
   ``use_cache=True`` vs ``False`` (both ``capture=False``), outputs asserted
   identical. The shipped preset's ``model.max_len`` (64) cannot hold
   prompt + 256 positions, so ``model.max_len`` is raised with ``with_values``
   (RoPE has no position table, so nothing else changes).
4. ``capture_overhead``: average step time of ``generate(capture=True)`` over
   ``generate(capture=False)``, both cached, minus 1; for the same char-lm
   decode and for the copy preset (encoder-decoder: encoder self, decoder self
   and cross attention captured). The headline is the larger of the two.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from bench.common import Row, Section, fmt_pct, fmt_ratio
from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.presets import load_preset
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD

NEW_TOKENS = 256
PROMPT = "The for statement is used "  # 26 characters of the kind char-lm trains on
KV_GOAL = 4.0
CAPTURE_GOAL = 0.10


def lm_config() -> tuple[LabConfig, str | None]:
    """char-lm with room for PROMPT + NEW_TOKENS positions; a note when the preset lacked it."""
    config = load_preset("char-lm")
    need = len(PROMPT) + NEW_TOKENS
    if config.model.max_len >= need:
        return config, None
    note = (
        f"preset char-lm has model.max_len {config.model.max_len} < {need} "
        f"(prompt {len(PROMPT)} + {NEW_TOKENS}); ran with model.max_len {need}"
    )
    return config.with_values({"model.max_len": need}), note


def _model(config: LabConfig, task: Any, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build_model(config.model, len(task.vocab), PAD)
    model.eval()
    return model


def _alternate(fns: dict[str, Any], reps: int, budget_s: float) -> dict[str, list[float]]:
    """Run each fn up to ``reps`` times, alternating order every round; seconds per call.

    Stops early (after at least two rounds) once ``budget_s`` is spent. ``<name>_cpu``
    holds the same calls' process CPU time (steadier on a shared machine, see
    ``common.interleaved``).
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    times.update({f"{k}_cpu": [] for k in fns})
    names = list(fns)
    start = time.perf_counter()
    for r in range(reps):
        if r >= 2 and time.perf_counter() - start > budget_s:
            break
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            t0, c0 = time.perf_counter(), time.process_time()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
            times[f"{name}_cpu"].append(time.process_time() - c0)
    return times


def kv_cache_speedup(quick: bool) -> Section:
    config, note = lm_config()
    task = make_task(config.task)
    model = _model(config, task)
    sec = Section("kv_cache_speedup", "3. greedy decoding, 256 new tokens: KV cache vs none")

    def run(cache: bool) -> Any:
        return generate(model, task, PROMPT, max_new_tokens=NEW_TOKENS, use_cache=cache, capture=False)

    cached, plain = run(True), run(False)  # warm-up, and the identity check
    assert len(cached.tokens) == NEW_TOKENS, f"produced {len(cached.tokens)} tokens, not {NEW_TOKENS}"
    assert cached.tokens == plain.tokens, "KV-cache output differs from the uncached output"
    times = _alternate({"cache": lambda: run(True), "plain": lambda: run(False)}, 5 if quick else 11,
                       budget_s=25 if quick else 90)
    # Each run is paired with its neighbour in time (other processes come and go):
    # the median of the pairs' ratios is the figure; the ratio of the fastest runs is kept too.
    t_cache, t_plain = statistics.median(times["cache"]), statistics.median(times["plain"])
    speedup = statistics.median(p / c for p, c in zip(times["plain"], times["cache"], strict=True))
    best = min(times["plain"]) / min(times["cache"])
    cpu = statistics.median(p / c for p, c in zip(times["plain_cpu"], times["cache_cpu"], strict=True))
    sec.values = {
        "kv_cache_speedup": round(speedup, 2),
        "kv_cache_goal": KV_GOAL,
        "kv_cache_pass": speedup >= KV_GOAL,
        "kv_cache_identical": True,
        "kv_cache_detail": {
            "speedup_best_runs": round(best, 3),
            "speedup_cpu_time": round(cpu, 3),
            "runs": len(times["cache"]),
            "new_tokens": NEW_TOKENS,
            "prompt_chars": len(PROMPT),
            "cached_ms_per_token": round(t_cache / NEW_TOKENS * 1000, 3),
            "uncached_ms_per_token": round(t_plain / NEW_TOKENS * 1000, 3),
            "max_len_used": config.model.max_len,
            "preset_note": note,
            "threads": torch.get_num_threads(),
        },
    }
    sec.rows.append(
        Row(
            "KV cache speedup (char-lm, 256 tokens)",
            fmt_ratio(speedup),
            f">= {KV_GOAL:g}x",
            speedup >= KV_GOAL,
            f"{t_cache / NEW_TOKENS * 1000:.2f} vs {t_plain / NEW_TOKENS * 1000:.2f} ms/token (median of "
            f"{len(times['cache'])} pairs; fastest runs {best:.2f}x; CPU time {cpu:.2f}x); outputs identical" + (f"; {note}" if note else ""),
        )
    )
    return sec


def _capture_ratio(
    model: torch.nn.Module, task: Any, text: str, max_new: int, reps: int, budget_s: float
) -> dict[str, Any]:
    def run(capture: bool) -> Any:
        return generate(model, task, text, max_new_tokens=max_new, use_cache=True, capture=capture)

    with_capture, without = run(True), run(False)
    steps = len(without.tokens)
    assert with_capture.tokens == without.tokens, "capture changed the decoded tokens"
    times = _alternate({"capture": lambda: run(True), "plain": lambda: run(False)}, reps, budget_s)
    reps = len(times["plain"])
    pairs = [c / p for c, p in zip(times["capture"], times["plain"], strict=True)]
    return {
        "overhead": statistics.median(pairs) - 1.0,  # runs paired with their neighbour in time
        "overhead_best_runs": min(times["capture"]) / min(times["plain"]) - 1.0,
        "overhead_cpu_time": statistics.median(
            c / p for c, p in zip(times["capture_cpu"], times["plain_cpu"], strict=True)
        ) - 1.0,
        "runs": reps,
        "steps": steps,
        "capture_ms_per_step": round(statistics.median(times["capture"]) / steps * 1000, 3),
        "plain_ms_per_step": round(statistics.median(times["plain"]) / steps * 1000, 3),
    }


def capture_overhead(quick: bool) -> Section:
    sec = Section("capture_overhead", "4. decoding with attention captured for display vs not")
    reps = 9 if quick else 21
    lm, _ = lm_config()
    lm_task = make_task(lm.task)
    lm_res = _capture_ratio(_model(lm, lm_task), lm_task, PROMPT, NEW_TOKENS, reps, 20 if quick else 80)
    copy = load_preset("copy")
    copy_task = make_task(copy.task)
    # An untrained copy model rarely emits EOS: it decodes to the length limit (max_len - 1).
    copy_res = _capture_ratio(
        _model(copy, copy_task), copy_task, "3141592653", copy.model.max_len, reps * 3, 10 if quick else 40
    )
    worst = max(lm_res["overhead"], copy_res["overhead"])
    sec.values = {
        "capture_overhead": round(worst, 4),
        "capture_overhead_goal": CAPTURE_GOAL,
        "capture_overhead_pass": worst <= CAPTURE_GOAL,
        "capture_overhead_char_lm": round(lm_res["overhead"], 4),
        "capture_overhead_copy": round(copy_res["overhead"], 4),
        "capture_detail": {"char_lm": lm_res, "copy": copy_res, "threads": torch.get_num_threads()},
    }
    for label, res in (("char-lm, 256 tokens", lm_res), (f"copy, {copy_res['steps']} tokens", copy_res)):
        sec.rows.append(
            Row(
                f"capture overhead ({label})",
                fmt_pct(res["overhead"]),
                f"<= {CAPTURE_GOAL:.0%}",
                res["overhead"] <= CAPTURE_GOAL,
                f"{res['capture_ms_per_step']:.2f} vs {res['plain_ms_per_step']:.2f} ms/step (median of "
                f"{res['runs']} pairs; fastest runs {res['overhead_best_runs']:+.1%}; "
                f"CPU time {res['overhead_cpu_time']:+.1%})",
            )
        )
    return sec
