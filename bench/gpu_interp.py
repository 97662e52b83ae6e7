"""The GPU's interpretability figures on a GPT-2-small-shaped model (random weights), one JSON.

    python -m bench.gpu_interp [--device cuda] [--quick]

1. ``decode``: greedy tokens/s of the lab's ``generate`` (KV cache) against
   ``transformers``' ``generate(do_sample=False)`` on the same folder, both in bf16 on the
   device, alternated (``bench.common.interleaved``); whether their tokens agree.
2. ``cache``: ``run_with_cache`` of every hook point against one plain forward pass
   (bf16, 128 tokens), paired medians.
3. ``patching``: the lab's batched ``resid_pre`` activation patching (12 layers x 16
   positions) against one forward pass per cell (``bench.patching.naive_patch``); the
   two grids are checked equal first.
4. ``sae``: a 16,384-feature TopK SAE (k 32) trained on ``blocks.6.hook_resid_pre``
   activations of that model: training tokens/s, and tokens/s with the activations
   collected by the model's forward passes counted in.

Each item is timed side by side in this one process; on a CPU ``--quick`` shrinks the
sizes so the plumbing can be checked without a GPU. ``transformers`` is the bench's
reference only (as everywhere in bench/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.common import Contender, interleaved
from bench.patching import _pair, gpt2_small_handle, naive_patch
from bench.real_models import PROMPT, write_model


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _paired(fns: dict[str, Callable[[], Any]], rounds: int, dev: torch.device) -> dict[str, float]:
    """Median wall seconds of each function, alternated ``rounds`` times after one warm-up."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for r in range(rounds):
        order = list(fns.items()) if r % 2 == 0 else list(reversed(fns.items()))
        for name, fn in order:
            _sync(dev)
            t0 = time.perf_counter()
            fn()
            _sync(dev)
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def decode_item(dev: torch.device, quick: bool) -> dict[str, Any]:
    """Lab greedy decoding against transformers' generate, bf16, same weights and prompt."""
    from tui_lab.core.decoding.decode import generate
    from tui_lab.core.opening.model_in_hand import open_model

    new_tokens = 16 if quick else 128
    with tempfile.TemporaryDirectory() as folder:
        hf = write_model(Path(folder)).to(dev, torch.bfloat16)
        lab = open_model(folder, dtype="bfloat16", device=str(dev))
    ids = lab.task.vocab.encode(PROMPT)
    x = torch.tensor([ids], device=dev)
    mask = torch.ones_like(x)

    def lab_tokens() -> list[int]:
        return list(generate(lab.model, lab.task, PROMPT, max_new_tokens=new_tokens, capture=False).tokens)

    def hf_tokens() -> list[int]:
        with torch.inference_mode():
            out = hf.generate(x, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, pad_token_id=0)
        return [int(t) for t in out[0, len(ids):]]

    ours, theirs = lab_tokens(), hf_tokens()
    res = interleaved(
        [Contender("transformers", lambda _i: float(len(hf_tokens()))),
         Contender("lab", lambda _i: float(len(lab_tokens())))],
        reference="transformers", budget_s=4.0 if quick else 30.0, window_s=0.5, min_rounds=3, warmup=1,
    )
    agree = sum(a == b for a, b in zip(ours, theirs, strict=False)) / max(1, min(len(ours), len(theirs)))
    return {**res, "new_tokens": len(ours), "token_agreement": round(agree, 3),
            "dtype": str(next(lab.model.parameters()).dtype)}


def cache_item(dev: torch.device, quick: bool) -> dict[str, Any]:
    """run_with_cache of every hook point against a plain forward pass (bf16, 128 tokens)."""
    handle = gpt2_small_handle()
    handle.model.to(dev, torch.bfloat16)
    handle.device = dev
    tokens = torch.randint(0, 50257, (1 if quick else 8, 32 if quick else 128),
                           generator=torch.Generator().manual_seed(1)).to(dev)
    seen: dict[str, int] = {}

    def plain() -> None:
        handle.model(tokens)

    def cached() -> None:
        _, cache = handle.run_with_cache(tokens)
        seen["hooks"] = len(cache)

    with torch.no_grad():
        t = _paired({"cached": cached, "plain": plain}, 3 if quick else 20, dev)
    return {"ratio": round(t["cached"] / t["plain"], 3), "hooks": seen["hooks"],
            "cached_ms": round(t["cached"] * 1000, 2), "plain_ms": round(t["plain"] * 1000, 2),
            "batch": list(tokens.shape)}


def patching_item(dev: torch.device, quick: bool) -> dict[str, Any]:
    """Batched resid_pre patching against one forward per cell, results checked equal first."""
    from tui_lab.core.analysis.patching.activation_patching import activation_patch

    handle = gpt2_small_handle()
    handle.model.to(dev)
    handle.device = dev
    pair = _pair()
    layers = list(range(2 if quick else 12))
    with torch.no_grad():
        batched = activation_patch(handle, pair, "resid_pre")
        naive = naive_patch(handle, pair, layers)
        worst = max(abs(a - b) for r in layers for a, b in zip(batched.raw[r], naive[r], strict=True))
        if quick:  # the plumbing only: no timing
            return {"max_abs_diff": worst, "cells": len(layers) * 16}
        t = _paired({"batched": lambda: activation_patch(handle, pair, "resid_pre"),
                     "per_cell": lambda: naive_patch(handle, pair, list(range(12)))}, 5, dev)
    return {"speedup": round(t["per_cell"] / t["batched"], 2), "batched_s": round(t["batched"], 3),
            "per_cell_s": round(t["per_cell"], 3), "max_abs_diff": worst, "cells": 12 * 16}


def sae_item(dev: torch.device, quick: bool) -> dict[str, Any]:
    """A 16,384-feature TopK SAE on blocks.6.hook_resid_pre: training tokens/s."""
    from tui_lab.core.sae.recipe import new_sae, train_settings
    from tui_lab.core.sae.trainer import SAETrainer

    handle = gpt2_small_handle()
    handle.model.to(dev, torch.bfloat16)
    handle.device = dev
    hook, batch, steps = "blocks.6.hook_resid_pre", 4096, (4 if quick else 200)
    seqs = torch.randint(0, 50257, (batch * steps // 128 + 1, 128), generator=torch.Generator().manual_seed(2))
    _sync(dev)
    t0 = time.perf_counter()
    rows = []
    with torch.no_grad():
        for chunk in seqs.split(32):
            _, cache = handle.run_with_cache(chunk.to(dev), names=[hook])
            rows.append(cache[hook].reshape(-1, 768).float())
    acts = torch.cat(rows)[: batch * steps]
    _sync(dev)
    collect_s = time.perf_counter() - t0
    sae = new_sae(768, 16_384, "topk", 32, hook, "gpt2-small-shaped", 128, device=str(dev))
    trainer = SAETrainer(sae, train_settings(tokens=batch * steps, batch=batch))
    trainer.initialize_from(acts[:batch])
    trainer.train_step(acts[:batch])  # warm-up: kernels, allocator
    _sync(dev)
    t0 = time.perf_counter()
    for b in acts.split(batch):
        trainer.train_step(b)
    _sync(dev)
    train_s = time.perf_counter() - t0
    n = acts.shape[0]
    return {"features": 16_384, "k": 32, "batch": batch, "tokens": n,
            "train_tokens_per_s": round(n / train_s), "with_collection_tokens_per_s": round(n / (train_s + collect_s)),
            "collect_s": round(collect_s, 2), "train_s": round(train_s, 2)}


ITEMS: dict[str, Callable[[torch.device, bool], dict[str, Any]]] = {
    "decode": decode_item, "cache": cache_item, "patching": patching_item, "sae": sae_item,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_interp")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="tiny sizes: the plumbing, not the figures")
    p.add_argument("--only", action="append", choices=sorted(ITEMS))
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                           "torch": torch.__version__}
    failed = False
    for name in args.only or list(ITEMS):
        t0 = time.perf_counter()
        try:
            out[name] = ITEMS[name](dev, args.quick)
        except Exception as exc:  # one item's failure is reported, the others still run
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            failed = True
        out[name]["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps({name: out[name]}), flush=True)
    print(json.dumps(out))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
