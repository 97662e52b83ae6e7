"""Run inside a reference venv (circuit-tracer 0.5.0 or SAELens 6.54.12), never the project's:

    python transcoder_reference.py ct-read DIR INPUTS OUT       circuit-tracer opens the lab's set
    python transcoder_reference.py ct-write DIR INPUTS OUT      circuit-tracer makes a set
    python transcoder_reference.py saelens-read DIR INPUTS OUT  SAELens opens each layer_<i>/
    python transcoder_reference.py saelens-write DIR INPUTS OUT SAELens makes one per layer

INPUTS is a safetensors file of ``x`` (n, d_model); OUT receives each layer's
``acts_<i>`` (its encoding of x) and ``out_<i>`` (its full output, skip included).
Imports only torch, safetensors, yaml and the reference library.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

D_TC = 12
LAYERS = 2


def ct_read(folder: Path, x: torch.Tensor) -> dict[str, torch.Tensor]:
    from circuit_tracer.utils.caching import load_transcoders_from_cache

    tset, _config = load_transcoders_from_cache(folder.name, cache_dir=folder.parent, device=torch.device("cpu"),
                                                 dtype=torch.float32)
    out = {}
    for i, tc in enumerate(tset):
        out[f"acts_{i}"] = tc.encode(x)
        out[f"out_{i}"] = tc(x)
    return out


def ct_write(folder: Path, x: torch.Tensor) -> dict[str, torch.Tensor]:
    import yaml
    from circuit_tracer.transcoder import SingleLayerTranscoder, TranscoderSet
    from circuit_tracer.transcoder.activation_functions import JumpReLU

    g = torch.Generator().manual_seed(11)
    d_model = x.shape[-1]
    layers = {}
    for i in range(LAYERS):
        threshold = torch.rand(D_TC, generator=g) * 0.3
        tc = SingleLayerTranscoder(d_model, D_TC, JumpReLU(threshold, 0.1), i, skip_connection=True,
                                   device=torch.device("cpu"), dtype=torch.float32)
        with torch.no_grad():
            for name in ("W_enc", "W_dec", "b_enc", "b_dec", "W_skip"):
                param = getattr(tc, name)
                param.copy_(torch.randn(param.shape, generator=g) * 0.5)
        layers[i] = tc
    tset = TranscoderSet(layers, feature_input_hook="mlp.hook_in", feature_output_hook="hook_mlp_out",
                         scan="reference")
    tset.to_safetensors(str(folder))
    config = {"model_kind": "transcoder_set", "feature_input_hook": "mlp.hook_in",
              "feature_output_hook": "hook_mlp_out", "scan": "reference", "revision": None}
    (folder / "config.yaml").write_text(yaml.dump(config))  # as its cache writes it
    return {f"{kind}_{i}": (tc.encode(x) if kind == "acts" else tc(x))
            for i, tc in layers.items() for kind in ("acts", "out")}


def saelens_read(folder: Path, x: torch.Tensor) -> dict[str, torch.Tensor]:
    from sae_lens import SAE

    out = {}
    for i in range(LAYERS):
        sae = SAE.load_from_disk(folder / f"layer_{i}", device="cpu")
        sae.eval()
        out[f"acts_{i}"] = sae.encode(x)
        out[f"out_{i}"] = sae(x)
    return out


def saelens_write(folder: Path, x: torch.Tensor) -> dict[str, torch.Tensor]:
    from sae_lens import JumpReLUSkipTranscoder, JumpReLUSkipTranscoderConfig

    g = torch.Generator().manual_seed(12)
    d_model = x.shape[-1]
    out = {}
    for i in range(LAYERS):
        cfg = JumpReLUSkipTranscoderConfig(d_in=d_model, d_sae=D_TC, d_out=d_model, apply_b_dec_to_input=False)
        cfg.metadata.hook_name = f"blocks.{i}.mlp.hook_in"
        cfg.metadata.hook_name_out = f"blocks.{i}.hook_mlp_out"  # type: ignore[attr-defined]
        sae = JumpReLUSkipTranscoder(cfg)
        with torch.no_grad():
            for param in sae.parameters():
                param.copy_(torch.randn(param.shape, generator=g) * 0.5)
            sae.threshold.copy_(torch.rand(D_TC, generator=g) * 0.3)
        sae.eval()
        sae.save_model(folder / f"layer_{i}")
        out[f"acts_{i}"] = sae.encode(x)
        out[f"out_{i}"] = sae(x)
    return out


ACTIONS = {"ct-read": ct_read, "ct-write": ct_write, "saelens-read": saelens_read, "saelens-write": saelens_write}

if __name__ == "__main__":
    action, folder, inputs, target = sys.argv[1:5]
    x = load_file(inputs)["x"]
    with torch.no_grad():
        result = ACTIONS[action](Path(folder), x)
    save_file({k: v.detach().float().contiguous() for k, v in result.items()}, target)
