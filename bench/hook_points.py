"""The ``hook_points`` item: what the hook points cost, side by side in one process.

1. A forward pass with hook points and no hook active, against the same pass
   before the hook points went in: the model modules of commit ``BASELINE``
   (``git show``) are loaded as a package of their own, given the same weights,
   and timed alternately with today's (goal: at most 1% slower). Two shapes: the
   char-lm preset's model on a batch of 16 x 128 characters, and one decoded
   token (a KV-cache step), where per-op overhead weighs most.
2. ``run_with_cache`` of every hook point of a GPT-2-small-shaped model (random
   weights, 128 tokens) against one plain forward pass (goal: at most 1.5x).
"""

from __future__ import annotations

import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from bench.common import Row, Section, fmt_pct, fmt_ratio
from tui_lab.core.config.presets import load_preset
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.hook_points import using_hooks
from tui_lab.core.model.models import build_model

BASELINE = "c09248c"  # the last commit before the hook points
OVERHEAD_GOAL = 0.01
CACHE_GOAL = 1.5
MODULES = ("positions", "attention", "layers", "models")
ROOT = Path(__file__).resolve().parents[1]


def _baseline_models() -> ModuleType:
    """``tui_lab.core.model.models`` as it was at ``BASELINE``, imported as its own package."""
    folder = Path(tempfile.mkdtemp(prefix="tfx-before-hooks-"))
    package = folder / "before_hooks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in MODULES:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BASELINE}:tui_lab/core/model/{name}.py"],
            check=True, capture_output=True, text=True,
        ).stdout
        for other in MODULES:
            source = source.replace(f"tui_lab.core.model.{other}", f"before_hooks.{other}")
        (package / f"{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("before_hooks.models")
    finally:
        sys.path.remove(str(folder))


def _paired(fns: dict[str, Callable[[], Any]], rounds: int, per_round: int) -> dict[str, list[float]]:
    """CPU seconds per call of each fn, in alternating rounds of ``per_round`` calls."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            c0 = time.process_time()
            for _ in range(per_round):
                fns[name]()
            times[name].append((time.process_time() - c0) / per_round)
    return times


def _overhead(new: torch.nn.Module, old: torch.nn.Module, run: Callable[[torch.nn.Module], Any],
              rounds: int, per_round: int) -> tuple[float, dict[str, float]]:
    times = _paired({"hooks": lambda: run(new), "before": lambda: run(old)}, rounds, per_round)
    ratios = [h / b for h, b in zip(times["hooks"], times["before"], strict=True)]
    return statistics.median(ratios) - 1.0, {
        "hooks_ms": round(statistics.median(times["hooks"]) * 1000, 3),
        "before_ms": round(statistics.median(times["before"]) * 1000, 3),
        "rounds": rounds,
    }


def _forward_overhead(quick: bool) -> dict[str, Any]:
    config = load_preset("char-lm").model
    config = ModelConfig(**{**config.__dict__, "max_len": 256})
    torch.manual_seed(0)
    new = build_model(config, 100).eval()
    old = _baseline_models().build_model(config, 100).eval()
    old.load_state_dict(new.state_dict())
    tokens = torch.randint(1, 100, (16, 128), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(new(tokens), old(tokens), atol=1e-5, rtol=0)

        def forward(model: torch.nn.Module) -> Any:
            return model(tokens)

        def step(model: torch.nn.Module) -> Any:  # one decoded token after a 64-token prompt
            cache = model.new_cache()
            model(tokens[:1, :64], cache)
            for t in range(64, 96):
                model(tokens[:1, t : t + 1], cache)

        rounds = 10 if quick else 30
        fwd, fwd_detail = _overhead(new, old, forward, rounds, 4)
        dec, dec_detail = _overhead(new, old, step, rounds, 4)
    return {"forward": fwd, "forward_detail": fwd_detail, "decode": dec, "decode_detail": dec_detail}


def _gpt2_small() -> torch.nn.Module:
    config = ModelConfig(
        arch="decoder-only", d_model=768, n_heads=12, n_decoder_layers=12, d_ff=3072, activation="gelu_tanh",
        positional="learned", max_len=1024, scale_embeddings=False, vocab_size=50257, dropout=0.0,
    )
    torch.manual_seed(0)
    return build_model(config).eval()


def _cache_cost(quick: bool) -> dict[str, Any]:
    model = _gpt2_small()
    tokens = torch.randint(0, 50257, (1, 128), generator=torch.Generator().manual_seed(1))
    store: dict[str, torch.Tensor] = {}

    def plain() -> None:
        model(tokens)

    def cached() -> None:
        store.clear()
        with using_hooks([(lambda _n: True, lambda x, n: store.__setitem__(n, x.detach()))]):
            model(tokens)

    with torch.no_grad():
        cached()
        times = _paired({"cached": cached, "plain": plain}, 4 if quick else 10, 2)
    ratios = [c / p for c, p in zip(times["cached"], times["plain"], strict=True)]
    return {"ratio": statistics.median(ratios), "hooks": len(store),
            "cached_ms": round(statistics.median(times["cached"]) * 1000, 1),
            "plain_ms": round(statistics.median(times["plain"]) * 1000, 1)}


def hook_points(quick: bool) -> Section:
    section = Section("hook_points", "Hook points: their cost with no hook, and caching every one")
    over = _forward_overhead(quick)
    cache = _cache_cost(quick)
    section.values = {"no_hook_overhead": over, "run_with_cache": cache}
    fd, dd = over["forward_detail"], over["decode_detail"]
    section.rows += [
        Row("forward pass, hook points and no hook / before them", fmt_pct(over["forward"]),
            f"<= {OVERHEAD_GOAL:.0%}", over["forward"] <= OVERHEAD_GOAL,
            f"char-lm model, batch 16 x 128; {fd['hooks_ms']} vs {fd['before_ms']} ms CPU (median of "
            f"{fd['rounds']} alternating rounds); before = the model modules of {BASELINE}, same weights"),
        Row("decoded token (KV cache), same comparison", fmt_pct(over["decode"]), "", None,
            f"prompt 64 then 32 tokens one at a time; {dd['hooks_ms']} vs {dd['before_ms']} ms CPU a decode"),
        Row("run_with_cache of every hook / one forward pass", fmt_ratio(cache["ratio"]),
            f"<= {CACHE_GOAL:g}x", cache["ratio"] <= CACHE_GOAL,
            f"GPT-2-small shape (random weights), 128 tokens, {cache['hooks']} hook points; "
            f"{cache['cached_ms']} vs {cache['plain_ms']} ms CPU"),
    ]
    return section
