"""Bad SAE folders are one line each, and reading them writes nothing into them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tests.core.sae.test_sae import _sae
from tui_lab.core.errors import LabError
from tui_lab.core.sae.folder import load_sae, save_sae


def _truncate(folder: Path) -> None:
    data = (folder / "sae_weights.safetensors").read_bytes()
    (folder / "sae_weights.safetensors").write_bytes(data[: len(data) // 2])


def _wrong_shape(folder: Path) -> None:
    sae = _sae("standard")
    tensors = {n: p.detach() for n, p in sae.named_parameters()}
    tensors["W_dec"] = torch.zeros(10, 5)
    save_file(tensors, str(folder / "sae_weights.safetensors"))


def _not_json(folder: Path) -> None:
    (folder / "cfg.json").write_text('{"d_in": 6, "d_sae": 10,')


def _nan(folder: Path) -> None:
    tensors = {n: p.detach().clone() for n, p in _sae("standard").named_parameters()}
    tensors["W_enc"][2, 3] = float("nan")
    save_file(tensors, str(folder / "sae_weights.safetensors"))


def _no_weights(folder: Path) -> None:
    (folder / "sae_weights.safetensors").unlink()


def _no_cfg(folder: Path) -> None:
    (folder / "cfg.json").unlink()


def _missing_tensor(folder: Path) -> None:
    tensors = {n: p.detach() for n, p in _sae("standard").named_parameters() if n != "b_enc"}
    save_file(tensors, str(folder / "sae_weights.safetensors"))


def _bad_k(folder: Path) -> None:
    cfg = json.loads((folder / "cfg.json").read_text())
    (folder / "cfg.json").write_text(json.dumps({**cfg, "architecture": "topk", "k": 0}))


def _truncated_sparsity(folder: Path) -> None:
    (folder / "sparsity.safetensors").write_bytes(b"\x10\x00\x00")


BREAKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated weights": (_truncate, "truncated"),
    "a wrong shape": (_wrong_shape, "W_dec has shape (10, 5), cfg.json says (10, 6)"),
    "cfg.json not JSON": (_not_json, "not JSON"),
    "NaN weights": (_nan, "W_enc holds NaN"),
    "no weights file": (_no_weights, "no sae_weights.safetensors"),
    "no cfg.json": (_no_cfg, "no cfg.json"),
    "a missing tensor": (_missing_tensor, "no tensor 'b_enc'"),
    "k out of range": (_bad_k, "topk needs k between 1 and d_sae=10"),
    "truncated sparsity": (_truncated_sparsity, "sparsity.safetensors"),
}


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file's digest and modification time: what "nothing written" compares."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("name", list(BREAKS))
def test_bad_folder_is_one_line_and_untouched(tmp_path: Path, name: str) -> None:
    breaks, expected = BREAKS[name]
    folder = tmp_path / "sae"
    save_sae(_sae("standard"), folder, log_sparsity=torch.zeros(10))
    breaks(folder)
    before = _snapshot(folder)
    with pytest.raises(LabError) as info:
        load_sae(folder)
    message = str(info.value)
    assert "\n" not in message and expected in message, message
    assert str(folder) in message
    assert _snapshot(folder) == before


def test_no_such_folder(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="no such folder"):
        load_sae(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()
