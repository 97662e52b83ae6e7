"""read_config and open_tensors: memory-mapped weights, one line per damaged file, nothing written."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.hf_fixtures.hf_cache import write_cache
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.files import open_tensors, read_config

STATE = {
    "wte.weight": torch.arange(40, dtype=torch.float32).view(10, 4) / 7,
    "h.0.attn.c_attn.bias": torch.linspace(-1, 1, 12),
    "half": torch.tensor([[1.5, -2.25], [3.0, 0.125]], dtype=torch.float16),
    "brain": torch.tensor([0.5, -8.0, 1e10], dtype=torch.bfloat16),
    "ids": torch.tensor([1, -2, 3], dtype=torch.int64),
    "mask": torch.tensor([True, False, True]),
    "nothing": torch.empty(0, 3),
}


def _folder(folder: Path, state: dict[str, torch.Tensor] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    save_file(state or STATE, str(folder / "model.safetensors"))
    return folder


def _mapped_ranges(path: Path) -> list[tuple[int, int]]:
    """The address ranges this process maps from ``path`` (Linux's /proc/self/maps)."""
    target = os.path.realpath(path)
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip() == target:
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((lo, hi))
    return ranges


def _in_mapping(t: torch.Tensor, ranges: list[tuple[int, int]]) -> bool:
    lo, hi = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
    return any(a <= lo and hi <= b for a, b in ranges)


def _snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``folder`` (symlinks followed) with its mtime, size and bytes."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.stat()
        out[str(p.relative_to(folder))] = (st.st_mtime_ns, st.st_size, p.read_bytes() if p.is_file() else b"")
    return out


def test_tensors_equal_the_safetensors_readers(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m")
    tensors = open_tensors(folder)
    reference = load_file(str(folder / "model.safetensors"))
    assert sorted(tensors) == sorted(reference) and len(tensors) == len(STATE)
    for name, want in reference.items():
        got = tensors[name]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        assert torch.equal(got, want), name
    assert tensors.tensor_file("wte.weight") == str(folder / "model.safetensors")
    assert tensors.nbytes == sum(t.numel() * t.element_size() for t in STATE.values())


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc/self/maps")
def test_tensors_are_views_of_the_mapped_file_not_copies(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m", {"a": torch.randn(256, 256), "b": torch.randn(1000)})
    tensors = open_tensors(folder)
    ranges = _mapped_ranges(folder / "model.safetensors")
    assert ranges, "the file is not memory-mapped"
    for name in ("a", "b"):
        assert _in_mapping(tensors[name], ranges), name


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc/self/maps")
def test_pytorch_model_bin_is_mapped_when_no_safetensors_exist(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    state = {"a": torch.randn(64, 64), "b": torch.arange(5)}
    torch.save(state, folder / "pytorch_model.bin")
    tensors = open_tensors(folder)
    assert set(tensors) == {"a", "b"} and all(torch.equal(tensors[k], state[k]) for k in state)
    assert _in_mapping(tensors["a"], _mapped_ranges(folder / "pytorch_model.bin"))
    # With a safetensors file beside it, the pickle is not read at all.
    save_file({"c": torch.zeros(2)}, str(folder / "model.safetensors"))
    assert set(open_tensors(folder)) == {"c"}


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch pwned",))


def test_a_pickle_that_runs_code_is_refused_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    torch.save({"a": torch.zeros(1), "b": _Boom()}, folder / "pytorch_model.bin")
    monkeypatch.chdir(folder)
    with pytest.raises(PretrainedError, match="pytorch_model.bin: not loadable as weights-only"):
        open_tensors(folder)
    assert not (folder / "pwned").exists()


def test_nothing_is_written_even_when_a_tensor_is_changed_in_place(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m")
    before = _snapshot(folder)
    read_config(folder)
    tensors = open_tensors(folder)
    tensors["wte.weight"].mul_(100)  # copy-on-write: only this process's pages change
    del tensors
    assert _snapshot(folder) == before
    assert torch.equal(open_tensors(folder)["wte.weight"], STATE["wte.weight"])


def test_a_cache_snapshot_is_read_through_its_symlinks_and_left_as_it_was(tmp_path: Path) -> None:
    snapshot = write_cache(tmp_path / "hub", "gpt2", _folder(tmp_path / "src"))
    repo = snapshot.parent.parent
    before = _snapshot(repo)
    assert (snapshot / "model.safetensors").is_symlink()
    tensors = open_tensors(snapshot)
    assert torch.equal(tensors["wte.weight"], STATE["wte.weight"])
    assert read_config(snapshot) == {"model_type": "gpt2"}
    assert _snapshot(repo) == before


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder sharded as huggingface_hub shards it (its index, several shards)."""
    from huggingface_hub import save_torch_state_dict

    folder = tmp_path_factory.mktemp("sharded")
    state = {f"h.{i}.w": torch.full((64, 64), float(i)) for i in range(4)}
    save_torch_state_dict(state, folder, max_shard_size=40_000)
    (folder / "config.json").write_text("{}")
    return folder


def _copy(folder: Path, to: Path) -> Path:
    to.mkdir()
    for p in folder.iterdir():
        (to / p.name).write_bytes(p.read_bytes())
    return to


def test_shards_are_read_as_the_index_places_them(sharded: Path) -> None:
    index = json.loads((sharded / "model.safetensors.index.json").read_text())["weight_map"]
    assert len(set(index.values())) > 1, "the fixture should be sharded"
    tensors = open_tensors(sharded)
    assert sorted(tensors) == sorted(index)
    for name, shard in index.items():
        assert torch.equal(tensors[name], torch.full((64, 64), float(name.split(".")[1])))
        assert tensors.tensor_file(name) == str(sharded / shard)
    assert tensors.tensor_file("lm_head.weight") == str(sharded / "model.safetensors.index.json")


def test_a_missing_shard_is_named_with_the_index(sharded: Path, tmp_path: Path) -> None:
    folder = _copy(sharded, tmp_path / "m")
    weight_map = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    shard = weight_map["h.3.w"]
    first = next(name for name, file in weight_map.items() if file == shard)
    (folder / shard).unlink()
    with pytest.raises(PretrainedError, match=rf"index.json: names shard {shard} \(for {first}\), which is missing"):
        open_tensors(folder)


def test_a_truncated_shard_is_named(sharded: Path, tmp_path: Path) -> None:
    folder = _copy(sharded, tmp_path / "m")
    shard = folder / json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]["h.0.w"]
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(PretrainedError, match=rf"^{shard}: truncated .*download or save it again$"):
        open_tensors(folder)


def test_an_index_cannot_point_outside_its_folder(sharded: Path, tmp_path: Path) -> None:
    folder = _copy(sharded, tmp_path / "m")
    index = folder / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["h.0.w"] = "../elsewhere.safetensors"
    index.write_text(json.dumps(data))
    with pytest.raises(PretrainedError, match=r"weight_map\['h.0.w'\] is not a file name"):
        open_tensors(folder)


def _hand_written(path: Path, header: dict[str, object], data: bytes, claimed: int | None = None) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", claimed if claimed is not None else len(raw)) + raw + data)


def test_an_unsupported_dtype_is_named_with_its_tensor(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    _hand_written(folder / "model.safetensors", {"w.q": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}, b"\0")
    with pytest.raises(PretrainedError, match=r"model.safetensors: tensor w.q has dtype 'F4'"):
        open_tensors(folder)


def test_a_tensor_whose_bytes_do_not_fit_its_shape_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    header = {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}
    _hand_written(folder / "model.safetensors", header, b"\0" * 8)
    with pytest.raises(PretrainedError, match=r"model.safetensors: tensor w: bytes 0..8 do not hold F32 \[3\]"):
        open_tensors(folder)


def test_a_header_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    _hand_written(folder / "model.safetensors", {}, b"", claimed=2**40)
    with pytest.raises(PretrainedError, match=r"model.safetensors: not a safetensors file \(its header claims 1099511627776 bytes, over the 100 MiB limit\)"):
        open_tensors(folder)


def test_no_weights_at_all_names_what_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(PretrainedError, match="no weights .model.safetensors, model.safetensors.index.json, pytorch_model.bin"):
        open_tensors(tmp_path)


def test_config_errors_are_one_line_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(PretrainedError, match=rf"^{tmp_path}: no config.json"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "gpt2",\n  "n_layer": }')
    with pytest.raises(PretrainedError, match=r"config.json: not JSON \(Expecting value: line 2 column 14") as err:
        read_config(tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(PretrainedError, match="config.json: not a JSON object"):
        read_config(tmp_path)


def test_a_save_pretrained_folder_holds_the_reference_models_weights(tmp_path: Path) -> None:
    from bench.hf_factory import save_family

    model = save_family(tmp_path, "gpt2", tokenizer=False)
    tensors = open_tensors(tmp_path)
    state = model.state_dict()
    assert set(tensors) <= set(state)  # the tied head is stored once
    assert "lm_head.weight" not in tensors
    for name, tensor in tensors.items():
        assert tensor.dtype == torch.float32 and torch.equal(tensor, state[name]), name
    assert read_config(tmp_path)["model_type"] == "gpt2"


@pytest.mark.usefixtures("no_network")
def test_a_cached_model_is_read_whole_without_any_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save_pretrained folder put in a hub cache: config, weights and tokenizer, offline."""
    from bench.hf_factory import save_family
    from tui_lab.core.pretrained.source import resolve_source
    from tui_lab.core.pretrained.tokenizer import load_tokenizer

    model = save_family(tmp_path / "saved", "gpt_neox")
    write_cache(tmp_path / "hub", "EleutherAI/pythia-14m", tmp_path / "saved")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    found = resolve_source("EleutherAI/pythia-14m")
    assert read_config(found.folder)["model_type"] == "gpt_neox"
    tensors = open_tensors(found.folder)
    assert torch.equal(tensors["gpt_neox.embed_in.weight"], model.state_dict()["gpt_neox.embed_in.weight"])
    assert load_tokenizer(found.folder).encode("The cat sat")


def test_a_cache_link_to_a_missing_blob_is_named(tmp_path: Path) -> None:
    snapshot = write_cache(tmp_path / "hub", "gpt2", _folder(tmp_path / "src"))
    (snapshot / "model.safetensors").resolve().unlink()
    with pytest.raises(PretrainedError, match=r"snapshots/a{40}/model.safetensors: a link to a missing file"):
        open_tensors(snapshot)
