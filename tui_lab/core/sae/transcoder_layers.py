"""Transcoders: a sparse layer that reads an MLP's input and predicts its output.

With x (..., d_model) the MLP's input (``feature_input_hook``) and y its output
(``feature_output_hook``), a per-layer transcoder computes

    z = x · W_encᵀ + b_enc                          pre-activations (..., d_tc)
    relu:      f = ReLU(z)
    topk:      f = ReLU(z) on the k largest z of each row, 0 elsewhere
    jumprelu:  f = z · [z > threshold]              one threshold per feature
    ŷ = f · W_dec + b_dec + x · W_skipᵀ             the skip term only with W_skip

The orientation is circuit-tracer's file's (``SingleLayerTranscoder``): W_enc and
W_dec are both (d_tc, d_model), one row per feature, and the skip is applied as
``x @ W_skip.T`` (W_skip (d_out, d_in), as circuit-tracer's ``compute_skip`` and
SAELens's ``SkipTranscoder`` both apply it). JumpReLU is circuit-tracer's
``z · [z > θ]``; SAELens's ``ReLU(z) · [z > θ]`` is the same with θ clamped at 0,
which is how its files are read (``transcoder_files.py``).

A ``TranscoderSet`` holds one transcoder per layer and the hooks they bracket, named
relative to a block by the lab's hook names (``ln2.hook_normalized``, ``hook_mlp_out``):
the full hook of layer l is ``blocks.{l}.{hook}``. Files name them as circuit-tracer
and SAELens resolve them (``transcoder_hooks.py``: the lab's ``ln2.hook_normalized`` is
their ``mlp.hook_in``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.jumprelu import jumprelu
from tui_lab.core.sae.sae import topk_relu

ARCHITECTURES = ("relu", "topk", "jumprelu")
# Where the lab's transcoders read and write: the MLP's exact input (after its norm)
# and its output, so splicing them in leaves the rest of the model untouched.
DEFAULT_INPUT_HOOK = "ln2.hook_normalized"
DEFAULT_OUTPUT_HOOK = "hook_mlp_out"


class Transcoder(nn.Module):
    """One layer's transcoder (parameters as circuit-tracer's ``layer_<i>.safetensors``)."""

    W_skip: nn.Parameter | None
    threshold: nn.Parameter | None

    def __init__(self, d_model: int, d_tc: int, layer: int, architecture: str = "relu", k: int | None = None,
                 skip: bool = False, device: torch.device | str = "cpu", seed: int | None = 0) -> None:
        super().__init__()
        if architecture not in ARCHITECTURES:
            raise SAEError(f"transcoder architecture {architecture!r} is not one of {', '.join(ARCHITECTURES)}")
        if architecture == "topk" and (k is None or not 1 <= k <= d_tc):
            raise SAEError(f"a topk transcoder needs k between 1 and d_tc={d_tc}, got {k!r}")
        self.d_model, self.d_tc, self.layer = d_model, d_tc, layer
        self.architecture = architecture
        self.k = k if architecture == "topk" else None
        self.W_enc = nn.Parameter(torch.empty(d_tc, d_model, device=device))
        self.b_enc = nn.Parameter(torch.zeros(d_tc, device=device))
        self.W_dec = nn.Parameter(torch.empty(d_tc, d_model, device=device))
        self.b_dec = nn.Parameter(torch.zeros(d_model, device=device))
        self.W_skip = nn.Parameter(torch.zeros(d_model, d_model, device=device)) if skip else None
        self.threshold = nn.Parameter(torch.zeros(d_tc, device=device)) if architecture == "jumprelu" else None
        self.bandwidth = 0.05  # the threshold's straight-through window (training only)
        self.initialize(seed)

    @torch.no_grad()
    def initialize(self, seed: int | None = 0) -> None:
        """Random unit decoder rows, the encoder tied to them, zero biases and skip (SAELens)."""
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        rows = torch.randn(self.d_tc, self.d_model, generator=gen, dtype=torch.float64)
        rows = rows / rows.norm(dim=-1, keepdim=True)
        self.W_dec.copy_(rows.to(self.W_dec))
        self.W_enc.copy_(self.W_dec)
        self.b_enc.zero_()
        self.b_dec.zero_()
        if self.W_skip is not None:
            self.W_skip.zero_()

    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """z = x · W_encᵀ + b_enc (..., d_tc) of MLP inputs x (..., d_model)."""
        return nn.functional.linear(x.to(self.W_enc.dtype), self.W_enc, self.b_enc)

    def activate(self, z: torch.Tensor) -> torch.Tensor:
        """Feature activations from pre-activations, by the architecture's nonlinearity."""
        if self.architecture == "topk":
            assert self.k is not None
            return topk_relu(z, self.k)
        if self.threshold is not None:
            return jumprelu(z, self.threshold, self.bandwidth)
        return z.relu()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations (..., d_tc) of MLP inputs x (..., d_model)."""
        return self.activate(self.pre_acts(x))

    def decode(self, acts: torch.Tensor) -> torch.Tensor:
        """acts · W_dec + b_dec (..., d_model): the features' share of the MLP output (no skip)."""
        return acts.to(self.W_dec.dtype) @ self.W_dec + self.b_dec

    def skip(self, x: torch.Tensor) -> torch.Tensor:
        """x · W_skipᵀ (..., d_model), zeros without a skip connection."""
        if self.W_skip is None:
            return torch.zeros(*x.shape[:-1], self.d_model, dtype=self.W_dec.dtype, device=x.device)
        return x.to(self.W_skip.dtype) @ self.W_skip.T

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The predicted MLP output decode(encode(x)) + skip(x)."""
        return self.decode(self.encode(x)) + self.skip(x)

    @property
    def has_skip(self) -> bool:
        return self.W_skip is not None


@dataclass
class TranscoderSet:
    """One transcoder per model layer and the lab's hooks (relative to a block) they bracket."""

    layers: list[Transcoder]
    feature_input_hook: str = DEFAULT_INPUT_HOOK
    feature_output_hook: str = DEFAULT_OUTPUT_HOOK
    scan: str = "tfx-lab"  # circuit-tracer's name for where the features' pictures live
    model_name: str | None = None
    step: int | None = None  # the history snapshot it was trained at, if one
    folder: Path | None = None  # where it was read from, if it was
    extra: dict[str, object] = field(default_factory=dict)  # other config.yaml keys, carried along
    file_hooks: tuple[str, str] | None = None  # the hooks as the file it was read from named them

    def __post_init__(self) -> None:
        if not self.layers:
            raise SAEError("a transcoder set needs at least one layer")
        for index, tc in enumerate(self.layers):
            if tc.layer != index:
                raise SAEError(f"the set's transcoder {index} says it is for layer {tc.layer}")
            if tc.d_model != self.d_model:
                raise SAEError(f"layer {index}'s transcoder has d_model={tc.d_model}, layer 0's {self.d_model}")

    @property
    def d_model(self) -> int:
        return self.layers[0].d_model

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, layer: int) -> Transcoder:
        return self.layers[layer]

    def __iter__(self) -> Iterator[Transcoder]:
        return iter(self.layers)

    def input_hook(self, layer: int) -> str:
        """The full name of layer ``layer``'s input hook (``blocks.{layer}.<feature_input_hook>``)."""
        return f"blocks.{layer}.{self.feature_input_hook}"

    def output_hook(self, layer: int) -> str:
        """The full name of layer ``layer``'s output hook (``blocks.{layer}.<feature_output_hook>``)."""
        return f"blocks.{layer}.{self.feature_output_hook}"

    def to(self, device: torch.device | str) -> TranscoderSet:
        for tc in self.layers:
            tc.to(device)
        return self
