"""Activation patching against an independent reference: ``transformers``' own model of each
family with plain PyTorch forward hooks on its modules, patching one site at a time (one
forward pass per cell). Every cell of every site agrees within 1e-4 (raw logit differences).

How the reference reaches each site:

- ``resid_pre``: a pre-hook on the block (its hidden-states input);
- ``attn_out``, ``mlp_out``: a hook on the attention module (its first output) and the MLP;
- ``z``, ``z_pos``: a pre-hook on the output projection (its input is the heads' outputs side
  by side, (B, T, H * d_head));
- ``q``, ``k``, ``v``: a hook on the projections (GPT-2's fused ``c_attn``, GPT-NeoX's
  per-head fused ``query_key_value``). These are before rotary, the lab's after it; over
  all positions of a head the two patches are the same run (rotary is a fixed map per position);
- ``pattern``: the clean run's attention weights (``output_attentions``) times the
  corrupted run's values of that head, put in at the output projection's input.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from bench.hf_factory import save_family
from tui_lab.core.analysis.patching.activation_patching import activation_patch
from tui_lab.core.analysis.patching.patch_pair import PatchPair
from tui_lab.core.opening.model_in_hand import open_model

FAMILIES = ["gpt2", "gpt_neox", "llama", "gpt_neo"]
T = 8
ATOL = 1e-4


@pytest.fixture(scope="module", params=FAMILIES)
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, Any]:
    folder: Path = tmp_path_factory.mktemp(request.param)
    # Larger weights than the factory's default: patching effects well above the tolerance.
    reference = save_family(folder, request.param, tokenizer=True, initializer_range=0.2)
    return request.param, open_model(folder), reference


def make_pair() -> PatchPair:
    g = torch.Generator().manual_seed(7)
    clean = torch.randint(1, 300, (T,), generator=g).tolist()
    corrupt = list(clean)
    corrupt[1], corrupt[4] = (clean[1] + 101) % 300, (clean[4] + 57) % 300
    return PatchPair(clean, corrupt, 17, 42)


# --- the reference's modules ------------------------------------------------------------


def blocks(name: str, ref: Any) -> nn.ModuleList:
    return {"gpt2": lambda: ref.transformer.h, "gpt_neox": lambda: ref.gpt_neox.layers,
            "llama": lambda: ref.model.layers, "gpt_neo": lambda: ref.transformer.h}[name]()


def attention(name: str, block: nn.Module) -> nn.Module:
    return {"gpt2": lambda: block.attn, "gpt_neox": lambda: block.attention,
            "llama": lambda: block.self_attn, "gpt_neo": lambda: block.attn}[name]()


def out_proj(name: str, block: nn.Module) -> nn.Module:
    attn = attention(name, block)
    return {"gpt2": lambda: attn.c_proj, "gpt_neox": lambda: attn.dense, "llama": lambda: attn.o_proj,
            "gpt_neo": lambda: attn.attention.out_proj}[name]()


def projection(name: str, block: nn.Module, which: str) -> tuple[nn.Module, Callable[[Tensor], Tensor]]:
    """The module whose output holds ``which`` (q, k or v), and a view of it as (B, T, heads, d_head)."""
    attn = attention(name, block)
    i = "qkv".index(which)
    if name == "gpt2":
        return attn.c_attn, lambda out: out.view(*out.shape[:2], 3, attn.num_heads, attn.head_dim)[:, :, i]
    if name == "gpt_neox":
        heads = attn.config.num_attention_heads
        return attn.query_key_value, lambda out: out.view(*out.shape[:2], heads, 3, attn.head_size)[:, :, :, i]
    module = attn if name == "llama" else attn.attention
    proj = getattr(module, f"{which}_proj")
    d_head = module.head_dim
    return proj, lambda out: out.view(*out.shape[:2], -1, d_head)


def run(ref: Any, ids: list[int], hooks: list[tuple[nn.Module, str, Callable[..., Any]]], **kwargs: Any) -> Any:
    """The reference's forward with ``hooks`` (module, "pre" or "post", fn) on for this call."""
    handles = []
    for module, when, fn in hooks:
        if when == "pre":
            handles.append(module.register_forward_pre_hook(fn, with_kwargs=True))
        else:
            handles.append(module.register_forward_hook(fn))
    try:
        with torch.no_grad():
            return ref(torch.tensor([ids]), **kwargs)
    finally:
        for h in handles:
            h.remove()


def diff(out: Any, pair: PatchPair) -> float:
    last = out.logits[0, -1]
    return float(last[pair.answer] - last[pair.wrong])


def first_input(args: tuple, kwargs: dict) -> Tensor:
    return args[0] if args else kwargs["hidden_states"]


def with_first_input(args: tuple, kwargs: dict, x: Tensor) -> tuple[tuple, dict]:
    if args:
        return (x, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": x}


def first_output(out: Any) -> Tensor:
    return out[0] if isinstance(out, tuple) else out


def with_first_output(out: Any, x: Tensor) -> Any:
    return (x, *out[1:]) if isinstance(out, tuple) else x


# --- one site at a time ------------------------------------------------------------------


def site_module(name: str, block: nn.Module, site: str) -> tuple[nn.Module, str]:
    if site == "resid_pre":
        return block, "pre"
    if site == "attn_out":
        return attention(name, block), "post"
    if site == "mlp_out":
        return block.mlp, "post"
    return out_proj(name, block), "pre"  # z, z_pos, pattern


def capture(name: str, ref: Any, ids: list[int], site: str, layer: int) -> Tensor:
    """The activation the reference computes at ``site`` of ``layer`` (the module's view of it)."""
    block = blocks(name, ref)[layer]
    got: list[Tensor] = []
    if site in ("q", "k", "v"):
        module, view = projection(name, block, site)
        run(ref, ids, [(module, "post", lambda _m, _i, out: got.append(view(out).clone()))])
        return got[0]
    module, when = site_module(name, block, site)
    if when == "pre":
        hook = lambda _m, args, kwargs: got.append(first_input(args, kwargs).clone())  # noqa: E731
    else:
        hook = lambda _m, _i, out: got.append(first_output(out).clone())  # noqa: E731
    run(ref, ids, [(module, when, hook)])
    return got[0]


def reference_cell(name: str, ref: Any, pair: PatchPair, site: str, layer: int, index: tuple[int, ...],
                   clean: Tensor, extra: dict[str, Tensor]) -> float:
    """The corrupted run with one cell of ``site`` patched to its clean value."""
    block = blocks(name, ref)[layer]

    def put(x: Tensor) -> Tensor:
        x = x.clone()
        if site in ("resid_pre", "attn_out", "mlp_out"):
            x[:, index[0]] = clean[:, index[0]]
            return x
        heads = x.view(*x.shape[:2], -1, extra["d_head"].item())  # (B, T, H, d_head), a view of x
        if site == "z":
            heads[:, :, index[0]] = clean.view_as(heads)[:, :, index[0]]
        elif site == "z_pos":
            h, p = index
            heads[:, p, h] = clean.view_as(heads)[:, p, h]
        else:  # pattern: clean weights times this run's values of the head
            h = index[0]
            v = extra["v"][:, :, h // extra["group"].item()]  # (B, T, d_head)
            heads[:, :, h] = clean[:, h] @ v
        return x

    if site in ("q", "k", "v"):
        module, view = projection(name, block, site)

        def post_qkv(_m: nn.Module, _i: Any, out: Tensor) -> Tensor:
            out = out.clone()
            view(out)[:, :, index[0]] = clean[:, :, index[0]]
            return out

        return diff(run(ref, pair.corrupt, [(module, "post", post_qkv)]), pair)
    module, when = site_module(name, block, site)
    if when == "pre":
        def pre(_m: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            return with_first_input(args, kwargs, put(first_input(args, kwargs)))

        return diff(run(ref, pair.corrupt, [(module, "pre", pre)]), pair)

    def post(_m: nn.Module, _i: Any, out: Any) -> Any:
        return with_first_output(out, put(first_output(out)))

    return diff(run(ref, pair.corrupt, [(module, "post", post)]), pair)


def reference_grid(name: str, ref: Any, pair: PatchPair, site: str, rows: int, cols: int) -> list[list[float]]:
    layout_heads = site in ("z", "pattern", "q", "k", "v")
    grid = [[0.0] * cols for _ in range(rows)]
    n_heads = ref.config.num_attention_heads
    d_head = ref.config.hidden_size // n_heads
    kv = getattr(ref.config, "num_key_value_heads", None) or n_heads
    for layer in range(len(blocks(name, ref))):
        extra = {"d_head": torch.tensor(d_head), "group": torch.tensor(n_heads // kv)}
        if site == "pattern":
            clean = run(ref, pair.clean, [], output_attentions=True).attentions[layer]  # (B, H, T, T)
            extra["v"] = capture(name, ref, pair.corrupt, "v", layer)
        else:
            clean = capture(name, ref, pair.clean, site, layer)
        if site == "z_pos":
            for h in range(n_heads):
                for p in range(cols):
                    grid[layer * n_heads + h][p] = reference_cell(name, ref, pair, site, layer, (h, p), clean, extra)
        elif layout_heads:
            for h in range(clean.size(2) if site in ("q", "k", "v") else n_heads):
                grid[layer][h] = reference_cell(name, ref, pair, site, layer, (h,), clean, extra)
        else:
            for p in range(cols):
                grid[layer][p] = reference_cell(name, ref, pair, site, layer, (p,), clean, extra)
    return grid


SITES = ["resid_pre", "attn_out", "mlp_out", "z", "z_pos", "pattern", "q", "k", "v"]


@pytest.mark.parametrize("site", SITES)
def test_every_cell_matches_the_reference(family: tuple[str, Any, Any], site: str) -> None:
    name, lab, ref = family
    pair = make_pair()
    # resid_pre in chunks of 3 cells a pass: rows of several layers share a pass.
    result = activation_patch(lab, pair, site, max_rows=4 if site == "resid_pre" else None)
    clean, corrupt = diff(run(ref, pair.clean, []), pair), diff(run(ref, pair.corrupt, []), pair)
    assert result.clean == pytest.approx(clean, abs=ATOL)
    assert result.corrupt == pytest.approx(corrupt, abs=ATOL)
    want = torch.tensor(reference_grid(name, ref, pair, site, len(result.rows), len(result.cols)))
    got = torch.tensor(result.raw)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    assert float(want.max() - want.min()) > 100 * ATOL  # the cells differ: the test can tell them apart
    expected = (want - corrupt) / (clean - corrupt)
    torch.testing.assert_close(torch.tensor(result.values), expected, atol=1e-3, rtol=1e-3)
