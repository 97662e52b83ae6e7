"""SAELens's on-disk format both ways: the lab's own round trip, and folders as SAELens writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tests.core.sae.test_sae import _reference, _sae
from tui_lab.core.errors import LabError
from tui_lab.core.sae.folder import load_sae, save_sae
from tui_lab.core.sae.sae import SparseAutoencoder


def _x(d_in: int = 6) -> torch.Tensor:
    return torch.tensor(np.random.default_rng(5).normal(size=(4, 3, d_in)), dtype=torch.float32)


@pytest.mark.parametrize("architecture", ["standard", "topk", "jumprelu"])
def test_round_trip(tmp_path: Path, architecture: str) -> None:
    sae = _sae(architecture)
    sae.cfg.metadata.hook_name = "blocks.1.hook_resid_post"
    sae.cfg.metadata.model_name = "char-lm"
    sae.cfg.metadata.context_size = 128
    sparsity = torch.linspace(-5, 0, sae.cfg.d_sae)
    save_sae(sae, tmp_path / "sae", log_sparsity=sparsity)
    back = load_sae(tmp_path / "sae")
    assert back.cfg == sae.cfg
    for name, p in sae.named_parameters():
        assert torch.equal(p, getattr(back, name)), name
    assert torch.equal(back.encode(_x()), sae.encode(_x()))
    assert torch.equal(back.log_sparsity, sparsity)  # type: ignore[arg-type]
    assert sorted(p.name for p in (tmp_path / "sae").iterdir()) == [
        "cfg.json", "sae_weights.safetensors", "sparsity.safetensors"]  # no temp file left


def test_written_keys_are_saelens_keys(tmp_path: Path) -> None:
    """cfg.json and the weights hold exactly what SAELens's ``load_from_disk`` reads."""
    sae = _sae("jumprelu")
    sae.cfg.metadata.hook_name = "blocks.0.hook_resid_post"
    save_sae(sae, tmp_path)
    cfg = json.loads((tmp_path / "cfg.json").read_text())
    assert {"d_in", "d_sae", "architecture", "dtype", "apply_b_dec_to_input", "normalize_activations",
            "metadata"} <= cfg.keys()
    assert (cfg["d_in"], cfg["d_sae"], cfg["architecture"], cfg["dtype"]) == (6, 10, "jumprelu", "float32")
    meta = cfg["metadata"]
    assert {"hook_name", "model_name", "context_size", "prepend_bos"} <= meta.keys()
    # SAELens reads a cfg.json without a 6.x version as its older flat layout, losing "metadata".
    assert int(meta["sae_lens_version"].split(".")[0]) >= 6
    with safe_open(str(tmp_path / "sae_weights.safetensors"), "pt") as f:
        shapes = {name: tuple(f.get_tensor(name).shape) for name in f.keys()}  # noqa: SIM118
    assert shapes == {"W_enc": (6, 10), "b_enc": (10,), "W_dec": (10, 6), "b_dec": (6,), "threshold": (10,)}
    topk = _sae("topk")
    save_sae(topk, tmp_path / "topk")
    assert json.loads((tmp_path / "topk" / "cfg.json").read_text())["k"] == 3


def _saelens_folder(folder: Path, cfg: dict[str, Any], weights: dict[str, torch.Tensor]) -> Path:
    """A folder as SAELens's ``save_inference_model`` writes it: json.dump, then save_file."""
    folder.mkdir(parents=True)
    with open(folder / "cfg.json", "w") as f:
        json.dump(cfg, f)
    save_file(weights, str(folder / "sae_weights.safetensors"))
    save_file({"sparsity": torch.full((cfg["d_sae"],), -3.0)}, str(folder / "sparsity.safetensors"))
    return folder


def _weights(d_in: int, d_sae: int, threshold: bool = False) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    out = {"W_enc": torch.randn(d_in, d_sae, generator=g), "b_enc": torch.randn(d_sae, generator=g) * 0.3,
           "W_dec": torch.randn(d_sae, d_in, generator=g), "b_dec": torch.randn(d_in, generator=g) * 0.3}
    if threshold:
        out["threshold"] = torch.rand(d_sae, generator=g) * 0.5
    return out


# SAELens 6's TopK inference config (TopKSAEConfig.to_dict / get_inference_sae_cfg_dict).
SAELENS_6_TOPK = {
    "d_in": 6, "d_sae": 10, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
    "normalize_activations": "none", "reshape_activations": "none", "k": 3,
    "rescale_acts_by_decoder_norm": True, "architecture": "topk",
    "metadata": {"sae_lens_version": "6.18.0", "sae_lens_training_version": "6.18.0",
                 "model_name": "gpt2", "hook_name": "blocks.1.hook_resid_post", "hook_head_index": None,
                 "context_size": 128, "prepend_bos": True, "seqpos_slice": [None],
                 "model_from_pretrained_kwargs": {}, "dataset_path": "monology/pile-uncopyrighted"},
}
SAELENS_6_JUMPRELU = {**SAELENS_6_TOPK, "architecture": "jumprelu", "apply_b_dec_to_input": False}
del SAELENS_6_JUMPRELU["k"], SAELENS_6_JUMPRELU["rescale_acts_by_decoder_norm"]
# A pre-6 file, as jbloom/GPT2-Small-SAEs-Reformatted's: flat, hook_point, no architecture.
SAELENS_OLD_STANDARD = {
    "model_name": "gpt2-small", "hook_point": "blocks.0.hook_resid_pre", "hook_point_layer": 0,
    "hook_point_head_index": None, "dataset_path": "Skylion007/openwebtext", "context_size": 128,
    "d_in": 6, "d_sae": 10, "dtype": "torch.float32", "device": "mps", "b_dec_init_method": "geometric_median",
    "l1_coefficient": 8e-05, "lr": 0.0004, "train_batch_size": 4096, "normalize_activations": False,
}
# A pre-6 TopK file: the activation function named, k in its kwargs.
SAELENS_OLD_TOPK = {**SAELENS_OLD_STANDARD, "activation_fn_str": "topk", "activation_fn": "topk",
                    "activation_fn_kwargs": {"k": 3}, "apply_b_dec_to_input": True,
                    "sae_lens_training_version": "3.13.0"}


@pytest.mark.parametrize(("cfg", "architecture", "hook"), [
    (SAELENS_6_TOPK, "topk", "blocks.1.hook_resid_post"),
    (SAELENS_6_JUMPRELU, "jumprelu", "blocks.1.hook_resid_post"),
    (SAELENS_OLD_STANDARD, "standard", "blocks.0.hook_resid_pre"),
    (SAELENS_OLD_TOPK, "topk", "blocks.0.hook_resid_pre"),
])
def test_saelens_folder_opens_with_identical_encodings(tmp_path: Path, cfg: dict[str, Any],
                                                       architecture: str, hook: str) -> None:
    weights = _weights(6, 10, threshold=architecture == "jumprelu")
    if cfg.get("rescale_acts_by_decoder_norm"):  # SAELens folds the norms in before saving
        weights["W_dec"] = weights["W_dec"] / weights["W_dec"].norm(dim=1, keepdim=True)
    folder = _saelens_folder(tmp_path / "saelens", cfg, weights)
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.metadata.hook_name, sae.cfg.metadata.context_size) == (
        architecture, hook, 128)
    x = _x().double().numpy()
    f_ref, x_hat_ref = _reference(sae, x)
    np.testing.assert_allclose(sae.encode(torch.tensor(x, dtype=torch.float32)).detach().numpy(), f_ref, atol=1e-5)
    np.testing.assert_allclose(sae.decode(torch.tensor(f_ref, dtype=torch.float32)).detach().numpy(), x_hat_ref,
                               atol=1e-5)
    assert torch.equal(sae.W_enc, weights["W_enc"]) and sae.log_sparsity is not None
    save_sae(sae, tmp_path / "again")  # and written back, it opens the same
    assert torch.equal(load_sae(tmp_path / "again").encode(_x()), sae.encode(_x()))


@pytest.mark.parametrize("architecture", ["gated", "transcoder"])
def test_other_architectures_are_one_line(tmp_path: Path, architecture: str) -> None:
    folder = _saelens_folder(tmp_path / "other", {**SAELENS_6_TOPK, "architecture": architecture},
                             _weights(6, 10))
    with pytest.raises(LabError) as info:
        load_sae(folder)
    message = str(info.value)
    assert "\n" not in message and repr(architecture) in message
    assert "standard, topk, jumprelu" in message


def test_open_sae_is_on_the_core_face(tmp_path: Path) -> None:
    import tui_lab.core as core

    save_sae(_sae("topk"), tmp_path)
    sae = core.open_sae(str(tmp_path))
    assert isinstance(sae, SparseAutoencoder) and sae.cfg.k == 3
    assert sae.encode(_x()).shape == (4, 3, 10) and sae.decode(sae.encode(_x())).shape == (4, 3, 6)
