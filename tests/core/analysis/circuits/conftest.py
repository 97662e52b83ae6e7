"""Small random models of three families with random transcoders, and an independent
frozen replacement model run FORWARD through the real model's hook points.

The reference does not share code with ``core/analysis/circuits``: it replays the
model with every attention pattern replaced by its clean value, every norm's
output recomputed from its live input with the clean scale (the norm written out
here from its definition), and each MLP's output replaced by its clean value plus
the skip connection's change, less whatever sources are switched off. What it
reads: each transcoder's pre-activations (without b_enc) and the demeaned logits.
Because the frozen system is affine, switching one source off changes every
target by exactly that source's edge.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from bench.hf_factory import save_family
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.transcoder import Transcoder, TranscoderSet

PROMPT = [0, 17, 42, 99, 17, 42, 5, 250]  # starts with the start token, as circuit-tracer wants


def random_transcoders(model: ModelInHand, d_tc: int = 48, skip: bool = True, seed: int = 0) -> TranscoderSet:
    """Random transcoders that leave about a quarter of the features active per position."""
    d = model.config.model.d_model
    layers = []
    gen = torch.Generator().manual_seed(seed)
    for layer in range(len(model.model.decoder.layers)):
        tc = Transcoder(d, d_tc, layer, architecture="jumprelu" if layer % 2 else "relu", skip=skip, seed=seed + layer)
        with torch.no_grad():
            tc.W_enc.copy_(torch.randn(d_tc, d, generator=gen))
            tc.b_enc.copy_(torch.randn(d_tc, generator=gen) - 2.0)
            tc.W_dec.copy_(torch.randn(d_tc, d, generator=gen) * 0.2)
            tc.b_dec.copy_(torch.randn(d, generator=gen) * 0.1)
            if tc.W_skip is not None:
                tc.W_skip.copy_(torch.randn(d, d, generator=gen) * 0.05)
            if tc.threshold is not None:
                tc.threshold.fill_(0.3)
        layers.append(tc)
    return TranscoderSet(layers)


@dataclass(frozen=True)
class Off:
    """Sources to switch off: features (layer, pos, feature), errors (layer, pos), token positions."""

    features: tuple[tuple[int, int, int], ...] = ()
    errors: tuple[tuple[int, int], ...] = ()
    tokens: tuple[int, ...] = ()


def _norm(norm: nn.Module, x: Tensor, scale: Tensor) -> Tensor:
    if isinstance(norm, nn.LayerNorm):
        return (x - x.mean(-1, keepdim=True)) * scale * norm.weight + norm.bias
    return x * scale * norm.weight


def _scale(norm: nn.Module, x: Tensor) -> Tensor:
    if isinstance(norm, nn.LayerNorm):
        return 1 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + norm.eps)
    eps = norm.eps if norm.eps is not None else torch.finfo(x.dtype).eps
    return 1 / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


@dataclass
class Reference:
    """The clean pass's values and a frozen forward replay with sources switched off."""

    model: ModelInHand
    ts: TranscoderSet
    ids: list[int]
    clean: dict[str, Tensor]
    acts: list[Tensor]  # (T, d_tc) per layer, position 0 zeroed
    errors: list[Tensor]  # (T, d) per layer, position 0 zeroed

    def run(self, off: Off = Off()) -> tuple[Tensor, Tensor]:
        """(pre-activations (L, T, d_tc) without b_enc, demeaned last-position logits (V,))."""
        blocks = self.model.model.decoder.layers
        parallel = self.model.config.model.parallel_residual
        stash: dict[str, Tensor] = {}
        pre: list[Tensor] = []
        hooks: list[tuple[str, Callable[[Tensor, str], Tensor | None]]] = []

        def keep(x: Tensor, name: str) -> None:
            stash[name] = x

        def embed(x: Tensor, name: str) -> Tensor:
            x = self.clean["hook_embed"].clone()
            for pos in off.tokens:
                x[0, pos] = 0
            return x

        hooks.append(("hook_embed", embed))
        for layer, block in enumerate(blocks):
            p = f"blocks.{layer}."
            ln2_in = p + ("hook_resid_pre" if parallel else "hook_resid_mid")
            hooks += [(p + "hook_resid_pre", keep)] + ([] if parallel else [(p + "hook_resid_mid", keep)])
            hooks.append((p + "attn.hook_pattern", lambda x, n, p=p: self.clean[p + "attn.hook_pattern"]))
            hooks.append((p + "ln1.hook_normalized", lambda x, n, p=p, b=block: _norm(
                b.norm1, stash[p + "hook_resid_pre"], _scale(b.norm1, self.clean[p + "hook_resid_pre"]))))
            hooks.append((p + "ln2.hook_normalized", lambda x, n, i=ln2_in, b=block: _norm(
                b.norm2, stash[i], _scale(b.norm2, self.clean[i]))))
            hooks.append((p + "ln2.hook_normalized", lambda x, n, layer=layer: pre.append(
                x[0] @ self.ts[layer].W_enc.T) or keep(x, f"in{layer}")))
            hooks.append((p + "hook_mlp_out", lambda x, n, layer=layer: self._mlp_out(layer, stash[f"in{layer}"], off)))
        last = f"blocks.{len(blocks) - 1}.hook_resid_post"
        hooks.append((last, keep))
        final = self.model.model.decoder.norm
        hooks.append(("ln_final.hook_normalized", lambda x, n: _norm(final, stash[last], _scale(final, self.clean[last]))))
        with torch.no_grad():
            logits = self.model.run_with_hooks(torch.tensor([self.ids]), hooks)[0, -1]
        return torch.stack(pre), logits - logits.mean()

    def _mlp_out(self, layer: int, live_in: Tensor, off: Off) -> Tensor:
        tc = self.ts[layer]
        p = f"blocks.{layer}."
        out = self.clean[p + "hook_mlp_out"].clone()
        out = out + tc.skip(live_in) - tc.skip(self.clean[p + "ln2.hook_normalized"])
        for lay, pos, feat in off.features:
            if lay == layer:
                out[0, pos] -= self.acts[layer][pos, feat] * tc.W_dec[feat]
        for lay, pos in off.errors:
            if lay == layer:
                out[0, pos] -= self.errors[layer][pos]
        return out


def make_reference(model: ModelInHand, ts: TranscoderSet, ids: list[int]) -> Reference:
    """The reference over float64 copies of ``model`` and ``ts`` (so its own rounding is
    far below the float32 graph's)."""
    model = model.private_copy()
    model.model.double()
    ts = TranscoderSet([copy.deepcopy(tc).double() for tc in ts])
    with torch.no_grad():
        _, clean = model.run_with_cache(torch.tensor([ids]))
        acts, errors = [], []
        for layer, tc in enumerate(ts):
            x = clean[f"blocks.{layer}.ln2.hook_normalized"][0]
            a = tc.encode(x)
            a[0] = 0
            e = clean[f"blocks.{layer}.hook_mlp_out"][0] - (a @ tc.W_dec + tc.b_dec + tc.skip(x))
            e[0] = 0
            acts.append(a)
            errors.append(e)
    return Reference(model, ts, ids, clean, acts, errors)


def _family(name: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ModelInHand, TranscoderSet]:
    folder: Path = tmp_path_factory.mktemp(f"circuits-{name}")
    save_family(folder, name)
    model = open_model(folder)
    return name, model, random_transcoders(model)


@pytest.fixture(scope="session", params=["gpt2", "llama", "gpt_neox"])
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ModelInHand, TranscoderSet]:
    """(family, a random small model of it opened from files, random transcoders for it)."""
    return _family(request.param, tmp_path_factory)


@pytest.fixture(scope="session")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ModelInHand, TranscoderSet]:
    """The gpt2 case alone."""
    return _family("gpt2", tmp_path_factory)
