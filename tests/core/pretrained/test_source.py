"""resolve_source: a folder, or a hub name found in a hub cache laid out as huggingface_hub's."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tests.hf_fixtures.hf_cache import write_cache
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.source import hub_cache_dir, resolve_source

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


def _model_folder(folder: Path, n_layer: int = 2) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": n_layer}))
    save_file({"wte.weight": torch.zeros(4, 2)}, str(folder / "model.safetensors"))
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache that HF_HUB_CACHE points at."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_a_folder_is_read_where_it_is(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path / "my model")
    src = resolve_source(str(folder))
    assert (src.folder, src.origin, src.name) == (folder.resolve(), "folder", str(folder))
    assert (src.repo_id, src.revision, src.commit) == (None, None, None)


@pytest.mark.usefixtures("no_network")
def test_a_hub_name_is_found_in_the_cache_without_any_socket(tmp_path: Path, cache: Path) -> None:
    write_cache(cache, "EleutherAI/pythia-14m", _model_folder(tmp_path / "src"), commit=COMMIT)
    src = resolve_source("EleutherAI/pythia-14m")
    assert src.folder == cache / "models--EleutherAI--pythia-14m" / "snapshots" / COMMIT
    assert (src.origin, src.repo_id, src.revision, src.commit) == (
        "cache", "EleutherAI/pythia-14m", "main", COMMIT,
    )
    assert json.loads((src.folder / "config.json").read_text())["n_layer"] == 2


@pytest.mark.usefixtures("no_network")
def test_the_hand_written_cache_is_the_layout_huggingface_hub_reads(
    tmp_path: Path, cache: Path
) -> None:
    """huggingface_hub's own cache scanner sees the repo, its ref and its files."""
    from huggingface_hub import scan_cache_dir

    write_cache(cache, "gpt2", _model_folder(tmp_path / "src"), commit=COMMIT)
    info = scan_cache_dir(cache)
    assert not info.warnings
    (repo,) = info.repos
    (rev,) = repo.revisions
    assert (repo.repo_id, rev.commit_hash, set(rev.refs)) == ("gpt2", COMMIT, {"main"})
    assert {f.file_name for f in rev.files} == {"config.json", "model.safetensors"}
    assert resolve_source("gpt2").folder == rev.snapshot_path


@pytest.mark.usefixtures("no_network")
def test_hf_home_is_read_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / "hub"
    write_cache(tmp_path / "home" / "hub", "gpt2", _model_folder(tmp_path / "src"), commit=COMMIT)
    assert resolve_source("gpt2").commit == COMMIT


@pytest.mark.usefixtures("no_network")
def test_a_revision_is_a_branch_or_a_commit(tmp_path: Path, cache: Path) -> None:
    write_cache(cache, "gpt2", _model_folder(tmp_path / "a", n_layer=2), commit=COMMIT)
    write_cache(cache, "gpt2", _model_folder(tmp_path / "b", n_layer=3), commit=OTHER, branch="dev")
    assert resolve_source("gpt2").commit == COMMIT
    dev = resolve_source("gpt2", revision="dev")
    assert (dev.revision, dev.commit) == ("dev", OTHER)
    assert json.loads((dev.folder / "config.json").read_text())["n_layer"] == 3
    assert resolve_source("gpt2", revision=OTHER).folder.name == OTHER
    (cache / "models--gpt2" / "refs" / "dev").write_text(OTHER + "\n")  # edited by hand
    assert resolve_source("gpt2", revision="dev").commit == OTHER


@pytest.mark.usefixtures("no_network")
def test_a_missing_model_names_the_download_command_and_the_cache(cache: Path) -> None:
    with pytest.raises(PretrainedError) as err:
        resolve_source("EleutherAI/pythia-14m")
    msg = str(err.value)
    assert "\n" not in msg
    assert "`hf download EleutherAI/pythia-14m`" in msg and str(cache) in msg


@pytest.mark.usefixtures("no_network")
def test_a_missing_revision_names_the_cached_ones(tmp_path: Path, cache: Path) -> None:
    write_cache(cache, "gpt2", _model_folder(tmp_path / "src"), commit=COMMIT)
    with pytest.raises(PretrainedError, match=r"revision v2 .*cached: main.*`hf download gpt2 --revision v2`"):
        resolve_source("gpt2", revision="v2")


@pytest.mark.usefixtures("no_network")
def test_a_snapshot_without_config_is_named(tmp_path: Path, cache: Path) -> None:
    folder = _model_folder(tmp_path / "src")
    (folder / "config.json").unlink()
    write_cache(cache, "gpt2", folder, commit=COMMIT)
    with pytest.raises(PretrainedError, match=f"snapshot {COMMIT} has no config.json"):
        resolve_source("gpt2")


def test_bad_sources_get_one_line(tmp_path: Path, cache: Path) -> None:
    folder = _model_folder(tmp_path / "m")
    with pytest.raises(PretrainedError, match="a folder has no revisions"):
        resolve_source(str(folder), revision="main")
    with pytest.raises(PretrainedError, match="a file; give the folder"):
        resolve_source(str(folder / "config.json"))
    with pytest.raises(PretrainedError, match="no such folder, and not a hub name"):
        resolve_source(str(tmp_path / "nowhere" / "at" / "all"))
    with pytest.raises(PretrainedError, match="no model named"):
        resolve_source("  ")


def test_the_guard_fails_any_connection(no_network: list[str]) -> None:
    with pytest.raises(AssertionError, match="network used"):
        socket.create_connection(("huggingface.co", 443))
    with pytest.raises(AssertionError, match="network used"):
        socket.getaddrinfo("huggingface.co", 443)
    with pytest.raises(AssertionError, match="network used"):
        with socket.socket() as sock:
            sock.connect(("127.0.0.1", 9))
    assert len(no_network) == 3
    no_network.clear()  # the attempts were this test's own
