"""Opening an SAE from a folder, or from a release's subfolder in the local Hugging Face cache, offline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.core.sae.test_sae import _sae
from tests.hf_fixtures.hf_cache import write_cache
from tui_lab.core.errors import LabError
from tui_lab.core.sae.folder import save_sae
from tui_lab.core.sae.source import open_sae

REPO = "someone/tiny-saes"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub cache holding REPO with two SAEs in subfolders, and the environment pointing at it."""
    release = tmp_path / "release"
    save_sae(_sae("topk"), release / "blocks.0.hook_resid_post")
    save_sae(_sae("jumprelu"), release / "layer_1" / "width_16")
    hub = tmp_path / "hub"
    write_cache(hub, REPO, release)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    return hub


@pytest.mark.usefixtures("no_network")
def test_release_from_the_cache(cache: Path) -> None:
    x = torch.randn(3, 6)
    sae = open_sae(f"{REPO}/blocks.0.hook_resid_post")
    assert sae.cfg.architecture == "topk" and sae.folder is not None and cache in sae.folder.parents
    assert torch.equal(sae.encode(x), _sae("topk").encode(x))
    nested = open_sae(REPO, subfolder="layer_1/width_16")
    assert nested.cfg.architecture == "jumprelu"
    assert open_sae(f"{REPO}/layer_1/width_16").cfg.d_sae == 10


@pytest.mark.usefixtures("no_network")
def test_missing_release_is_one_line(cache: Path) -> None:
    with pytest.raises(LabError) as info:
        open_sae(f"{REPO}/blocks.9.hook_resid_post")
    message = str(info.value)
    assert "\n" not in message and "blocks.9.hook_resid_post/cfg.json" in message
    assert f"hf download {REPO} --include 'blocks.9.hook_resid_post/*'" in message
    with pytest.raises(LabError, match="not in|no blocks.0"):
        open_sae("other/repo/blocks.0.hook_resid_post")


def test_folder_and_refusals(tmp_path: Path) -> None:
    save_sae(_sae("standard"), tmp_path / "run" / "sae")
    assert open_sae(tmp_path / "run" / "sae").cfg.architecture == "standard"
    assert open_sae(str(tmp_path / "run"), subfolder="sae").cfg.architecture == "standard"
    with pytest.raises(LabError, match="a file"):
        open_sae(tmp_path / "run" / "sae" / "cfg.json")
    with pytest.raises(LabError, match="ORG/REPO/SUBFOLDER"):
        open_sae("not-a-folder")
    with pytest.raises(LabError, match="no SAE named"):
        open_sae(" ")


def test_missing_path_is_not_a_hub_name(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="no such folder$"):
        open_sae(tmp_path / "absent" / "sae")
