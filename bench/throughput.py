"""The ``train_speed_vs_torch`` and ``decoder_speed_vs_torch`` items: training tokens/s against ``torch.nn``.

Both sides train through the same step (a copy of ``TrainingRun._train_step``:
forward, cross entropy, ``zero_grad``, backward, gradient clipping, the lab's
``make_optimizer`` AdamW) on the same pre-built batches, with the same thread
count, in alternating windows (``common.interleaved``). Tokens are counted as
``TrainingRun`` counts them: every source and target position of the batch.

1. ``train_speed_vs_torch``: encoder-decoder at the copy preset's sizes
   (dropout 0) vs ``nn.Transformer(batch_first=True, norm_first=<preset>)``.
2. ``decoder_speed_vs_torch``: decoder-only at the char-lm preset's sizes
   (dropout 0) vs ``nn.TransformerEncoder`` with a causal mask. RoPE has no
   ``nn`` equivalent, so the headline ratio uses sinusoidal positions on both
   sides; the preset as shipped (RoPE) is reported next to it.
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch
import torch.nn.functional as F

from bench.common import Contender, Row, Section, fmt_ratio, interleaved
from bench.reference import build_reference
from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.presets import load_preset
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD
from tui_lab.core.training.mfu import matmul_peak, mfu, train_flops_per_token
from tui_lab.core.training.schedule import make_optimizer

GOAL = 1.1
N_BATCHES = 16


def make_train_step(model: torch.nn.Module, config: LabConfig):
    """One optimisation step as ``TrainingRun._train_step`` takes it on one CPU process
    (no gradient accumulation, no DDP, fp32), minus data loading."""
    cfg = config.train
    optimizer = make_optimizer(model, cfg)
    decoder_only = config.model.arch == "decoder-only"
    max_norm = cfg.clip if cfg.clip > 0 else float("inf")
    params = list(model.parameters())

    def step(batch: Any) -> float:
        model.train()
        optimizer.zero_grad(set_to_none=True)
        logits = model(batch.tgt_in) if decoder_only else model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(),
            batch.tgt_out.flatten(),
            ignore_index=-100,
            label_smoothing=cfg.label_smoothing,
        )
        loss.backward()
        loss_value = float(loss.detach())
        float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        optimizer.step()
        return loss_value

    return step


def batch_tokens(batch: Any) -> int:
    return batch.tgt_in.numel() + (batch.src.numel() if batch.src is not None else 0)


def _contender(name: str, model: torch.nn.Module, config: LabConfig, batches: list) -> Contender:
    step = make_train_step(model, config)

    def run(i: int) -> float:
        b = batches[i % len(batches)]
        loss = step(b)
        if not math.isfinite(loss):
            raise RuntimeError(f"{name}: loss became {loss}")
        return batch_tokens(b)

    return Contender(name, run)


def _models(config: LabConfig, vocab_size: int, seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(seed)
    lab = build_model(config.model, vocab_size, PAD)
    torch.manual_seed(seed)
    ref = build_reference(config.model, vocab_size, PAD)
    n_lab = sum(p.numel() for p in lab.parameters())
    n_ref = sum(p.numel() for p in ref.parameters())
    if n_lab != n_ref:
        raise AssertionError(f"lab has {n_lab} parameters, the reference {n_ref}: sizes differ")
    return lab, ref


def train_speed_vs_torch(quick: bool) -> Section:
    config = load_preset("copy").with_values({"model.dropout": 0.0})
    task = make_task(config.task)
    rng = random.Random(0)
    batches = [task.batch(rng, config.train.batch_size, config.model.arch) for _ in range(N_BATCHES)]
    lab, ref = _models(config, len(task.vocab))
    res = interleaved(
        [_contender("lab", lab, config, batches), _contender("torch", ref, config, batches)],
        reference="torch",
        budget_s=18 if quick else 60,
    )
    m = config.model
    sizes = (
        f"d_model {m.d_model}, {m.n_heads} heads, {m.n_encoder_layers}+{m.n_decoder_layers} layers, "
        f"d_ff {m.d_ff}, {m.norm}-LN, batch {config.train.batch_size}"
    )
    ratio = res["lab"]["ratio"]
    sec = Section("train_speed_vs_torch", "1. encoder-decoder training vs nn.Transformer")
    sec.values = {
        "train_speed_vs_torch": round(ratio, 3),
        "train_speed_goal": GOAL,
        "train_speed_pass": ratio >= GOAL,
        "train_speed_detail": _detail(res, "lab", "torch", sizes),
    }
    sec.rows.append(
        Row(
            "train tokens/s, lab / nn.Transformer",
            fmt_ratio(ratio),
            f">= {GOAL}x",
            ratio >= GOAL,
            f"lab {res['lab']['median']:,.0f} vs {res['torch']['median']:,.0f} tok/s (median of {res['rounds']} "
            f"rounds, range {res['lab']['ratio_min']:.2f}-{res['lab']['ratio_max']:.2f}; CPU-time ratio "
            f"{res['lab']['ratio_cpu']:.2f}); {sizes}",
        )
    )
    return sec


def decoder_speed_vs_torch(quick: bool) -> Section:
    shipped = load_preset("char-lm").with_values({"model.dropout": 0.0})
    config = shipped.with_values({"model.positional": "sinusoidal"})
    task = make_task(config.task)
    rng = random.Random(0)
    batches = [task.batch(rng, config.train.batch_size, "decoder-only") for _ in range(N_BATCHES)]
    lab, ref = _models(config, len(task.vocab))
    torch.manual_seed(0)
    lab_rope = build_model(shipped.model, len(task.vocab), PAD)
    res = interleaved(
        [
            _contender("lab", lab, config, batches),
            _contender("torch", ref, config, batches),
            _contender("lab_rope", lab_rope, shipped, batches),
        ],
        reference="torch",
        budget_s=24 if quick else 75,
    )
    m = config.model
    sizes = (
        f"d_model {m.d_model}, {m.n_heads} heads, {m.n_decoder_layers} layers, d_ff {m.d_ff}, "
        f"{m.norm}-LN, batch {config.train.batch_size} x {config.task.block_size}"
    )
    ratio = res["lab"]["ratio"]
    rope = res["lab_rope"]["ratio"]
    sec = Section("decoder_speed_vs_torch", "2. decoder-only training vs nn.TransformerEncoder (causal)")
    sec.values = {
        "decoder_speed_vs_torch": round(ratio, 3),
        "decoder_speed_goal": GOAL,
        "decoder_speed_pass": ratio >= GOAL,
        "decoder_speed_rope_vs_torch": round(rope, 3),
        "decoder_speed_detail": _detail(res, "lab", "torch", sizes) | {
            "lab_rope_tokens_per_s": round(res["lab_rope"]["median"], 1),
        },
    }
    sec.rows.append(
        Row(
            "train tokens/s, lab / nn.TransformerEncoder",
            fmt_ratio(ratio),
            f">= {GOAL}x",
            ratio >= GOAL,
            f"sinusoidal on both; lab {res['lab']['median']:,.0f} vs {res['torch']['median']:,.0f} tok/s "
            f"(median of {res['rounds']} rounds, range {res['lab']['ratio_min']:.2f}-{res['lab']['ratio_max']:.2f}; "
            f"CPU-time ratio {res['lab']['ratio_cpu']:.2f}); {sizes}",
        )
    )
    fpt, peak = train_flops_per_token(shipped, len(task.vocab)), matmul_peak(torch.device("cpu"))
    lab_mfu = mfu(shipped, fpt, res["lab_rope"]["median"], peak)
    sec.values["decoder_mfu"] = round(lab_mfu, 4)
    sec.values["decoder_mfu_torch"] = round(mfu(config, fpt, res["torch"]["median"], peak), 4)
    sec.rows.append(
        Row(
            "  char-lm training MFU (lab, RoPE)",
            f"{lab_mfu:.1%}",
            "",
            None,
            f"{fpt:,} train FLOPs/token x {res['lab_rope']['median']:,.0f} tok/s over a {peak / 1e9:.1f} GFLOP/s "
            f"fp32 matmul peak ({torch.get_num_threads()} threads; nn.TransformerEncoder "
            f"{sec.values['decoder_mfu_torch']:.1%})",
        )
    )
    sec.rows.append(
        Row(
            "  same, lab with the preset's RoPE",
            fmt_ratio(rope),
            "",
            None,
            f"{res['lab_rope']['median']:,.0f} tok/s, CPU-time ratio {res['lab_rope']['ratio_cpu']:.2f} "
            f"(the torch side has no RoPE)",
        )
    )
    return sec


def _detail(res: dict[str, Any], lab: str, ref: str, sizes: str) -> dict[str, Any]:
    return {
        "lab_tokens_per_s": round(res[lab]["median"], 1),
        "torch_tokens_per_s": round(res[ref]["median"], 1),
        "ratio_min": round(res[lab]["ratio_min"], 3),
        "ratio_max": round(res[lab]["ratio_max"], 3),
        "ratio_best_windows": round(res[lab]["ratio_best_windows"], 3),
        "ratio_cpu_time": round(res[lab]["ratio_cpu"], 3),
        "ratio_cpu_time_min": round(res[lab]["ratio_cpu_min"], 3),
        "ratio_cpu_time_max": round(res[lab]["ratio_cpu_max"], 3),
        "rounds": res["rounds"],
        "steps_per_window": res["units_per_window"],
        "threads": torch.get_num_threads(),
        "sizes": sizes,
    }
