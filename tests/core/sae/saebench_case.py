"""The case SAEBench and the lab both evaluate: a tiny char-lm run, its held-out windows, an SAE.

``make_case`` writes them into a folder (``run/``, ``ids.safetensors``, ``sae/``,
``case.json``); ``lab_core`` is the lab's side over them; ``saebench_side.py``
is SAEBench's, in its own venv.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tests.cli.helpers import tfx
from tests.cli.test_sae import HOOK, PRESET
from tui_lab.core.sae.config import SAEConfig, SAEMetadata
from tui_lab.core.sae.folder import load_sae, save_sae
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.saebench import CoreEvalConfig

CASE = {"hook": HOOK, "prompts": 2, "recon_batches": 2, "sparsity_batches": 2}


def make_case(work: Path) -> None:
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.sae.recipe import read_texts, text_windows

    (work / "tiny.yaml").write_text(PRESET)
    assert tfx("train", "--preset", str(work / "tiny.yaml"), "--out", str(work / "run"), "--json").returncode == 0
    model = open_model(str(work / "run"))
    windows = text_windows(model, read_texts(model, None, "tiny")[1])[:8]
    save_file({"ids": windows.contiguous()}, str(work / "ids.safetensors"))
    meta = SAEMetadata(hook_name=HOOK, model_name="tiny", context_size=windows.shape[1], prepend_bos=False)
    sae = SparseAutoencoder(SAEConfig(d_in=32, d_sae=64, architecture="topk", k=4, metadata=meta), seed=3)
    with torch.no_grad():
        sae.b_enc.normal_(0, 0.3, generator=torch.Generator().manual_seed(4))
        sae.W_enc.mul_(0.5)
    save_sae(sae, work / "sae")
    (work / "case.json").write_text(json.dumps(CASE))


def lab_core(work: Path) -> tuple[dict[str, float], dict[str, list[float]]]:
    """The lab's numbers and per-feature lists for the case."""
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.sae.saebench_output import run_core

    model = open_model(str(work / "run"))
    windows = load_file(str(work / "ids.safetensors"))["ids"]
    config = CoreEvalConfig(model_name="tiny", batch_size_prompts=CASE["prompts"],  # type: ignore[arg-type]
                            n_eval_reconstruction_batches=CASE["recon_batches"],  # type: ignore[arg-type]
                            n_eval_sparsity_variance_batches=CASE["sparsity_batches"],  # type: ignore[arg-type]
                            context_size=windows.shape[1])
    return run_core(load_sae(work / "sae"), model, windows, HOOK, config)
