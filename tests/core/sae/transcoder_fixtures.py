"""What the transcoder tests share: a fresh tiny decoder-only model with MLPs in hand, a set
of given shape with random weights, and the transcoder's maths written out by hand."""

from __future__ import annotations

import torch

from tui_lab.core.config.lab_config import from_dict
from tui_lab.core.model.models import build_run_model
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import Transcoder, TranscoderSet
from tui_lab.core.tasks import make_task


def tiny_handle(d_model: int = 16, layers: int = 2, d_ff: int = 32, seed: int = 0,
                **model_keys: object) -> ModelInHand:
    """A random-weight induction model (decoder-only, learned positions, an MLP per layer
    unless d_ff=0); ``model_keys`` adds to its model section (``output_norms=True``)."""
    config = from_dict({
        "model": {"arch": "decoder-only", "d_model": d_model, "n_heads": 2, "n_encoder_layers": 0,
                  "n_decoder_layers": layers, "d_ff": d_ff, "positional": "learned", "tie_embeddings": False,
                  **model_keys},
        "task": {"name": "induction", "min_len": 3, "max_len": 6, "block_size": 16},
        "train": {"device": "cpu", "threads": 1},
    }, source="<tiny-mlp>", name="tiny-mlp")
    task = make_task(config.task)
    torch.manual_seed(seed)
    model = build_run_model(config, len(task.vocab), "cpu").eval()
    return ModelInHand(config, task, model, 0, torch.device("cpu"), [])


def random_set(d_model: int, d_tc: int, layers: int, architecture: str = "relu", skip: bool = False,
               k: int | None = None, seed: int = 0) -> TranscoderSet:
    """A set whose every weight is random (biases and thresholds too), so no term hides."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for layer in range(layers):
        tc = Transcoder(d_model, d_tc, layer, architecture, k, skip, seed=None)
        with torch.no_grad():
            for p in tc.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            if tc.threshold is not None:
                tc.threshold.copy_(torch.rand(d_tc, generator=g) * 0.5)
        out.append(tc.eval())
    return TranscoderSet(out)


def hand_pre_acts(x: list[float], w_enc: list[list[float]], b_enc: list[float]) -> list[float]:
    """z_i = Σ_j W_enc[i][j] x_j + b_enc[i], W_enc one row per feature."""
    return [sum(w * v for w, v in zip(row, x, strict=True)) + b for row, b in zip(w_enc, b_enc, strict=True)]


def hand_activate(z: list[float], architecture: str, k: int | None = None,
                  threshold: list[float] | None = None) -> list[float]:
    """ReLU; the k largest kept (then ReLU); JumpReLU z·[z > θ]."""
    if architecture == "relu":
        return [max(v, 0.0) for v in z]
    if architecture == "topk":
        assert k is not None
        keep = sorted(range(len(z)), key=lambda i: z[i], reverse=True)[:k]
        return [max(z[i], 0.0) if i in keep else 0.0 for i in range(len(z))]
    assert threshold is not None
    return [v if v > t else 0.0 for v, t in zip(z, threshold, strict=True)]


def hand_forward(x: list[float], tc: Transcoder) -> tuple[list[float], list[float]]:
    """(features, prediction) of one row x, from the transcoder's weights as plain lists."""
    z = hand_pre_acts(x, tc.W_enc.tolist(), tc.b_enc.tolist())
    threshold = tc.threshold.tolist() if tc.threshold is not None else None
    f = hand_activate(z, tc.architecture, tc.k, threshold)
    w_dec, b_dec = tc.W_dec.tolist(), tc.b_dec.tolist()
    y = [sum(f[i] * w_dec[i][d] for i in range(len(f))) + b_dec[d] for d in range(len(b_dec))]
    if tc.W_skip is not None:  # x · W_skipᵀ: out_d = Σ_j W_skip[d][j] x_j
        skip = tc.W_skip.tolist()
        y = [y[d] + sum(skip[d][j] * x[j] for j in range(len(x))) for d in range(len(y))]
    return f, y
