"""Run by SAELens's own Python (``/tmp/ref-saelens``), never by the lab's: SAELens's side of the round trip.

    python saelens_side.py WORKDIR

WORKDIR holds ``x.safetensors`` (``x``: (N, d_in) activations) and the lab-written
folders ``lab_btk/`` and ``lab_mat/``. This script writes ``saelens.safetensors``
(SAELens's encodings of the lab's files, of its own files, and its training-mode
BatchTopK features), SAELens-written folders (``sl_btk/`` for inference,
``sl_btk_train/`` and ``sl_mat_train/`` as training checkpoints) and
``losses.json`` (a Matryoshka training step's loss terms).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from sae_lens import SAE
from sae_lens.saes import (
    BatchTopKTrainingSAE,
    BatchTopKTrainingSAEConfig,
    MatryoshkaBatchTopKTrainingSAE,
    MatryoshkaBatchTopKTrainingSAEConfig,
)
from sae_lens.saes.sae import TrainStepInput
from safetensors.torch import load_file, save_file


def main(work: Path) -> None:
    x = load_file(str(work / "x.safetensors"))["x"]
    out: dict[str, torch.Tensor] = {}
    for name in ("lab_btk", "lab_mat"):
        sae = SAE.load_from_disk(str(work / name))
        out[f"{name}_enc"] = sae.encode(x).detach()
        out[f"{name}_dec"] = sae.decode(sae.encode(x)).detach()
    torch.manual_seed(0)
    d_in = x.shape[1]
    # BatchTopK as SAELens trains it (decoder rows at norm 0.1, ranked rescaled by them)
    btk = BatchTopKTrainingSAE(BatchTopKTrainingSAEConfig(d_in=d_in, d_sae=16, k=3))
    with torch.no_grad():
        btk.b_enc.normal_(0, 0.1)
        btk.b_dec.normal_(0, 0.1)
    btk.topk_threshold = torch.tensor(0.21, dtype=torch.double)
    out["sl_btk_train_features"] = btk.encode(x).detach()  # training: the batch's top-k
    btk.save_model(str(work / "sl_btk_train"))
    btk.save_inference_model(str(work / "sl_btk"))
    inference = SAE.load_from_disk(str(work / "sl_btk"))
    out["sl_btk_enc"] = inference.encode(x).detach()
    out["sl_btk_dec"] = inference.decode(inference.encode(x)).detach()
    mat = MatryoshkaBatchTopKTrainingSAE(MatryoshkaBatchTopKTrainingSAEConfig(
        d_in=d_in, d_sae=16, k=3, matryoshka_widths=[4, 8, 16], rescale_acts_by_decoder_norm=False))
    mat.save_model(str(work / "sl_mat_train"))
    step = mat.training_forward_pass(TrainStepInput(sae_in=x, coefficients={}, dead_neuron_mask=None,
                                                    n_training_steps=0, is_logging_step=False))
    losses = {name: float(value) for name, value in step.losses.items()}
    (work / "losses.json").write_text(json.dumps({"total": float(step.loss), **losses}))
    save_file({k: v.contiguous() for k, v in out.items()}, str(work / "saelens.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
