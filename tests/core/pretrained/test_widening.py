"""Half-precision weights widened to float32 before torch is imported (``pretrained/widening.py``):
the same bits torch's own conversion gives, used by ``open_files`` in place of its own
widening, and given up on (silently) wherever ``open_files`` has something to say."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from bench.hf_factory import hf_model, save_tokenizer
from tests.core.pretrained.family_reference import prompt
from tui_lab.core.pretrained.files import open_tensors
from tui_lab.core.pretrained.widening import Widened, Widening, start_widening


def _awkward(dtype: torch.dtype, n: int = 2990, seed: int = 0) -> torch.Tensor:
    """Values that a sloppy conversion gets wrong: signed zeros, infinities, NaN, the
    subnormals and the extremes of ``dtype``, and a spread of ordinary numbers."""
    info = torch.finfo(dtype)
    special = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, info.tiny, info.tiny / 4,
                            -info.tiny / 8, info.max, -info.max, info.eps, 1.0, -1.0])
    spread = torch.randn(n, generator=torch.Generator().manual_seed(seed)) * 100
    return torch.cat([special, spread]).to(dtype)


def _mixed_file(path: Path) -> dict[str, torch.Tensor]:
    """A file with runs of bfloat16 and float16 tensors broken by float32 and int64 ones."""
    tensors = {
        "a.bf16": _awkward(torch.bfloat16).reshape(-1, 13),
        "b.bf16": _awkward(torch.bfloat16, seed=1)[:1001],
        "c.f32": torch.randn(7, 5),
        "d.f16": _awkward(torch.float16, seed=2).reshape(13, -1),
        "e.i64": torch.arange(12).reshape(3, 4),
        "f.bf16": _awkward(torch.bfloat16, seed=3)[:1],
        "g.f16": _awkward(torch.float16, seed=4)[:17],
    }
    save_file(tensors, str(path))
    return tensors


def _widened(path: Path) -> Widened:
    (path / "config.json").write_text("{}")
    widening = start_widening(str(path))
    assert widening is not None
    return widening.take()


def test_copies_are_bit_for_bit_torchs_own_widening(tmp_path: Path) -> None:
    tensors = _mixed_file(tmp_path / "model.safetensors")
    copies = _widened(tmp_path)
    half = {n for n, t in tensors.items() if t.dtype in (torch.bfloat16, torch.float16)}
    assert set(copies.arrays) == half  # float32 and int64 are left to the file's own views
    for name in half:
        path, array = copies.arrays[name]
        assert path == tmp_path / "model.safetensors"
        got = torch.from_numpy(array)
        want = tensors[name].to(torch.float32)
        assert got.dtype == torch.float32 and got.shape == want.shape, name
        # The same bits, NaN and the sign of zero included.
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), name


def test_a_sharded_model_is_widened_from_every_shard(tmp_path: Path) -> None:
    first = {"x": _awkward(torch.bfloat16)[:64]}
    second = {"y": _awkward(torch.float16)[:64], "z": torch.ones(3)}
    save_file(first, str(tmp_path / "one.safetensors"))
    save_file(second, str(tmp_path / "two.safetensors"))
    index = {"weight_map": {"x": "one.safetensors", "y": "two.safetensors", "z": "two.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    copies = _widened(tmp_path)
    assert {n: p.name for n, (p, _) in copies.arrays.items()} == {"x": "one.safetensors", "y": "two.safetensors"}
    got = torch.from_numpy(copies.arrays["y"][1])
    assert torch.equal(got.view(torch.int32), second["y"].float().view(torch.int32))


@pytest.mark.parametrize("damage", ["truncated", "not safetensors", "no weights"])
def test_what_open_model_would_refuse_is_left_to_it(tmp_path: Path, damage: str) -> None:
    _mixed_file(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{}")
    weights = tmp_path / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "not safetensors":
        weights.write_bytes(b"not a safetensors file at all")
    else:
        weights.unlink()
    widening = start_widening(str(tmp_path))
    assert widening is None or not widening.take().arrays
    assert start_widening(str(tmp_path / "no such folder")) is None


class _Made:
    """What a finished ``Widening`` hands over, kept here to see where the model's weights live."""

    def __init__(self, folder: Path) -> None:
        made = start_widening(str(folder))
        assert made is not None
        self.copies = made.take()

    def take(self) -> Widened:
        return self.copies

    def holds(self, tensor: torch.Tensor) -> bool:
        return any(torch.from_numpy(a).data_ptr() == tensor.data_ptr() for _, a in self.copies.arrays.values())


def test_open_model_runs_on_the_copies_and_gives_the_same_logits(tmp_path: Path) -> None:
    """A bfloat16 qwen2 folder opened in float32: with copies made ahead, the model holds
    them (no widening of its own), says the weights were widened, and its logits equal
    those of a plain opening (to rounding before the background re-layout, exactly after
    it, once it has handed back the pages of the copies it replaced)."""
    from tui_lab.core.opening.from_files import open_files

    reference = hf_model("qwen2", seed=0).to(torch.bfloat16)
    reference.save_pretrained(tmp_path)
    save_tokenizer(tmp_path, reference.config.vocab_size)
    plain = open_files(str(tmp_path))
    made = _Made(tmp_path)
    ahead = open_files(str(tmp_path), lay_out_later=True, widening=made)
    norms = [p for n, p in ahead.model.named_parameters() if p.dim() == 1]
    assert norms and all(made.holds(p) for p in norms)  # never re-laid: the copies themselves
    assert {p.dtype for p in ahead.model.parameters()} == {torch.float32}
    assert ahead.notes.count("weights stored as bfloat16, widened to float32") == 1
    assert ahead.notes == plain.notes
    tokens = prompt(vocab=reference.config.vocab_size)
    with torch.no_grad():
        want = plain.model(tokens)
        # Before the re-layout the matrices lie as stored, so the products round differently.
        assert (ahead.model(tokens) - want).abs().max() < 1e-5
        ahead.settle()
        assert torch.equal(ahead.model(tokens), want)  # laid out alike: the same bits


def test_bfloat16_mode_ignores_the_copies(tmp_path: Path) -> None:
    from tui_lab.core.opening.from_files import open_files

    reference = hf_model("qwen2", seed=0).to(torch.bfloat16)
    reference.save_pretrained(tmp_path)
    save_tokenizer(tmp_path, reference.config.vocab_size)
    loaded = open_files(str(tmp_path), dtype="bfloat16", widening=_Made(tmp_path))
    assert {p.dtype for p in loaded.model.parameters()} == {torch.bfloat16}


def test_a_replaced_copy_hands_its_pages_back(tmp_path: Path) -> None:
    save_file({"w": torch.ones(64, 4096, dtype=torch.bfloat16)}, str(tmp_path / "model.safetensors"))
    copies = _widened(tmp_path)
    source = open_tensors(tmp_path).widened(copies)
    assert source["w"].dtype == torch.float32 and bool((source["w"] == 1).all())
    assert source.release(source["w"]) == 64 * 4096 * 4  # whole pages: the 1 MiB copy


def test_widening_starts_without_torch(tmp_path: Path) -> None:
    """It runs while torch is imported: neither it nor numpy may import torch first."""
    import subprocess
    import sys

    _mixed_file(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{}")
    code = (
        "import sys\nfrom tui_lab.core.pretrained.widening import start_widening\n"
        f"w = start_widening({str(tmp_path)!r})\nn = len(w.take().arrays)\n"
        "print(n, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["5", "False"]


def test_take_hands_the_copies_over_once(tmp_path: Path) -> None:
    _mixed_file(tmp_path / "model.safetensors")
    widening = Widening([tmp_path / "model.safetensors"])
    assert len(widening.take().arrays) == 5
    assert widening.take().arrays == {}
