"""The ``families`` item: a Qwen2.5-0.5B-shaped model saved in bfloat16, opened in both precisions.

The model: Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads, 2 key/value
heads, MLP 4,864, vocabulary 151,936, tied head, biases on q/k/v; 494 M
parameters) with random weights, built by ``transformers`` and written in
bfloat16 with ``save_pretrained`` beside the tests' small BPE. Measured:

- resident memory of a fresh process that opens it and decodes two tokens
  (``real_models.resident_memory``): its growth over the weights in float32
  (``--dtype float32``, the default) and over the file's bytes (``--dtype
  bfloat16``, the weights held as stored); goal at most 1.15x each;
- ``tfx-lab --model FOLDER`` in a real pty: seconds to the model ready (goal 3 s);
- greedy tokens/s of the lab's ``generate`` against ``transformers``' in each
  precision, alternated in one process at one thread (goal 1.2x in float32).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch

from bench.common import Row, Section, fmt_ratio
from bench.real_models import decode_speed, first_frame, resident_memory

SHAPE = dict(
    hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
    intermediate_size=4864, max_position_embeddings=32768, vocab_size=151936, tie_word_embeddings=True,
    rope_theta=1_000_000.0, rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=0,
)
MEMORY_GOAL = 1.15
READY_GOAL_S = 3.0
SPEED_GOAL = 1.2


def write_model(folder: Path) -> Any:
    """The random Qwen2.5-0.5B-shaped model, saved in bfloat16 with a BPE; the transformers model."""
    import transformers

    from bench.hf_factory import save_tokenizer

    torch.manual_seed(0)
    with torch.device("cpu"):
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SHAPE)).eval()
    model.to(torch.bfloat16).save_pretrained(folder)
    save_tokenizer(folder, SHAPE["vocab_size"])
    return model


def _file_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def families(quick: bool) -> Section:
    from tui_lab.core.opening.from_files import open_files

    section = Section("families", "Families: a Qwen2.5-0.5B-shaped model (bf16 file), float32 and bfloat16")
    with tempfile.TemporaryDirectory(prefix="tfx-bench-qwen-") as tmp:
        folder = Path(tmp)
        hf = write_model(folder)
        file_bytes = _file_bytes(folder)
        fp32 = resident_memory(folder, "float32")
        bf16 = resident_memory(folder, "bfloat16")
        # One launch scatters by a second or more on a shared machine: the median of three.
        frames = [first_frame(folder) for _ in range(1 if quick else 3)]
        ready: dict[str, Any] = {k: statistics.median(f[k] for f in frames) for k in frames[0]}
        ready["runs"] = len(frames)
        budget = 20 if quick else 60
        speed: dict[str, Any] = {}
        for dtype, torch_dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
            lab = open_files(str(folder), dtype=dtype)
            speed[dtype] = decode_speed(lab, hf.to(torch_dtype), 1, 8, budget)
            del lab
    fp32_growth = (fp32["after_decode"]["VmRSS"] - fp32["base"]["VmRSS"]) / fp32["weight_bytes"]
    bf16_growth = (bf16["after_decode"]["VmRSS"] - bf16["base"]["VmRSS"]) / file_bytes
    section.values = {"file_bytes": file_bytes, "float32": fp32, "bfloat16": bf16, "ready": ready, "speed": speed}
    section.rows += [
        Row("resident memory / weights, --dtype float32", fmt_ratio(fp32_growth), f"<= {MEMORY_GOAL}x",
            fp32_growth <= MEMORY_GOAL, f"RSS growth {_mb(fp32, 'after_decode')} over {fp32['weight_bytes'] / 2**20:,.0f} "
            f"MiB of float32 weights, after open and a 2-token decode"),
        Row("resident memory / file bytes, --dtype bfloat16", fmt_ratio(bf16_growth), f"<= {MEMORY_GOAL}x",
            bf16_growth <= MEMORY_GOAL, f"RSS growth {_mb(bf16, 'after_decode')} over {file_bytes / 2**20:,.0f} MiB "
            f"of safetensors (bfloat16, held as stored)"),
        Row("tfx-lab --model: model ready", f"{ready['ready_s']:.2f} s", f"<= {READY_GOAL_S:g} s",
            ready["ready_s"] <= READY_GOAL_S, f"real pty 120x40, float32, median of {ready['runs']}; first frame {ready['first_frame_s']:.2f} s; "
            f"the lab's CPU time by then {ready['ready_cpu_s']:.2f} s"),
    ]
    for dtype in ("float32", "bfloat16"):
        res = speed[dtype]
        ratio = res["lab"]["ratio_cpu"]
        goal = dtype == "float32"
        section.rows.append(Row(
            f"greedy tokens/s, lab / transformers, {dtype} (1 thread)", fmt_ratio(ratio),
            f">= {SPEED_GOAL}x" if goal else "", ratio >= SPEED_GOAL if goal else None,
            f"CPU-time ratio; lab {res['lab']['median_cpu']:.2f} vs {res['transformers']['median_cpu']:.2f} tok/s; "
            f"{res['new_tokens']} new tokens; tokens {'identical' if res['identical'] else 'differ'}",
        ))
    return section


def _mb(res: dict[str, Any], when: str) -> str:
    return f"{(res[when]['VmRSS'] - res['base']['VmRSS']) / 2**20:,.0f} MiB"
