"""Weights re-laid for decoding (``pretrained/layout.py``): the same values and the same
model, each matrix contiguous along its longer dimension, the file's pages handed back."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from bench.hf_factory import save_family
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.files import open_tensors, read_config
from tui_lab.core.pretrained.relayout import lay_out, preferred, relaid


def test_a_matrix_is_relaid_along_its_longer_dimension_with_the_same_values() -> None:
    wide = torch.randn(300, 40)  # (out, in): stored as rows of 40, read best along the 300
    tall = torch.randn(300, 40).t()  # (40, 300) as a view: columns of 40
    for w in (wide, tall):
        assert not preferred(w)
        new = relaid(w)
        assert torch.equal(new, w) and new.shape == w.shape
        assert preferred(new)
    assert relaid(wide).stride() == (1, 300)
    assert relaid(tall).stride() == (300, 1)
    assert preferred(torch.randn(64, 64)) and preferred(torch.randn(50, 300).t())


def test_lay_out_keeps_the_model_its_outputs_and_a_tied_head_tied(tmp_path: Path) -> None:
    folder = tmp_path / "gpt2"
    reference = save_family(folder, "gpt2")
    tensors = open_tensors(folder)
    _, model = build_pretrained(read_config(folder), tensors)
    head = model.lm_head.weight
    # The tied (vocab, d) head is read along the vocabulary; it is still the embedding.
    assert head.stride() == (1, head.size(0))
    assert model.tgt_embed.weight is head
    relaid_names = [n for n, p in model.named_parameters() if p.dim() == 2 and p.stride(0) == 1]
    assert "lm_head.weight" not in relaid_names  # named once, as the embedding (tied)
    assert "tgt_embed.weight" in relaid_names
    tokens = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), reference(tokens).logits, atol=1e-4, rtol=0)
    assert lay_out(model) == 0  # already laid out: nothing more to copy


def test_released_pages_leave_the_values_readable(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    big = torch.arange(1 << 20, dtype=torch.float32).view(1024, 1024)
    save_file({"big": big, "small": torch.ones(3)}, str(path))
    (tmp_path / "config.json").write_text("{}")
    tensors = open_tensors(tmp_path)
    view = tensors["big"]
    assert torch.equal(view, big)  # every page read in
    released = tensors.release(view)
    assert released >= big.numel() * 4 - 2 * 4096  # all but the partial pages at its ends
    assert tensors.release(torch.ones(1 << 20)) == 0  # not a tensor of the file
    assert torch.equal(view, big)  # read back from the file


def _resident_file_bytes(path: Path) -> int:
    """Bytes of ``path``'s mappings resident in this process (Linux's /proc/self/smaps)."""
    target, inside, total = str(path.resolve()), False, 0
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
                inside = fields[-1] == target
            elif inside and fields[0] == "Rss:":
                total += int(fields[1]) * 1024
    return total


def test_a_relaid_model_holds_its_weights_once(tmp_path: Path) -> None:
    """After a forward pass has read every weight, the file's resident pages are those of
    the weights used in place, not those of the copies (each handed back)."""
    folder = tmp_path / "gpt2"
    save_family(folder, "gpt2", tokenizer=False, n_embd=64, vocab_size=4096)
    tensors = open_tensors(folder)
    _, model = build_pretrained(read_config(folder), tensors)
    with torch.no_grad():
        model(torch.arange(16)[None])
    mapped = {t.data_ptr() for t in tensors.values()}
    copied = sum(p.numel() * 4 for p in model.parameters() if p.data_ptr() not in mapped)
    assert copied >= 4096 * 64 * 4  # the head at least
    resident = _resident_file_bytes(folder / "model.safetensors")
    in_place = tensors.nbytes - copied
    assert resident <= in_place + 64 * 4096, (resident, in_place)  # a page or two per tensor


def test_bfloat16_matrices_keep_their_stored_layout() -> None:
    """bfloat16 matrix-vector kernels run slower on a transposed matrix: only float32
    matrices are re-laid."""
    wide = torch.nn.Linear(128, 1024, bias=False)  # (out 1024, in 128): read along its 1024
    assert not preferred(wide.weight.detach())  # float32: re-laid
    model = torch.nn.Sequential(wide).to(torch.bfloat16)
    before = model[0].weight
    assert preferred(before.detach()) and lay_out(model) == 0
    assert model[0].weight is before and model[0].weight.is_contiguous()
