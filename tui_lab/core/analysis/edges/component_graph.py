"""The graph of components of a decoder-only model: writers, readers and the edges between them.

A circuit is made of edges, not nodes. Every component that adds to the residual
stream is a **writer**: the embeddings (``input``: token embedding, scaled, plus
positions), each attention head's output (``a{L}.h{H}``: its ``z`` through its
slice of ``w_o``, without the output bias, which no input changes) and each MLP's
output (``m{L}``). Every component that reads the residual stream is a **reader**:
each head's query, key and value inputs (``a{L}.h{H}<q>``, ``<k>``, ``<v>``), each
MLP's input (``m{L}``) and the logits (``logits``: the final norm's input). A
reader's input is the sum of the outputs of the writers before it (plus the
biases), so an edge is one writer's contribution to one reader's input; its name
is ``writer->reader`` (``a0.h1->a1.h3<k>``), as EAP-IG (Hanna et al. 2024,
``eap/graph.py``) and the MIB circuit track name them.

Writers are indexed in the order they write (``input``, then per layer the heads,
then the MLP); readers in the order they read (per layer the heads' q, then k,
then v inputs, then the MLP, and ``logits`` last). ``allowed`` is the (writers,
readers) mask of the edges that exist: a writer feeds every reader of a later
layer, an attention head the MLP of its own layer (not with a parallel residual,
where both read the block's input), and every writer feeds the logits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled
from tui_lab.core.analysis.patching.patch_pair import PatchError

QKV = ("q", "k", "v")
_HEAD_READER = re.compile(r"^a(\d+)\.h(\d+)<([qkv])>$")
_HEAD = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP = re.compile(r"^m(\d+)$")


# (done, total, what), as the verbs report; and the caller's wish to stop.
Progress = Callable[[int, int, str], None]
Cancelled = Callable[[], bool]


class EdgeError(PatchError):
    """Input the edge analyses cannot take (a model, an edge or a head out of range); one line."""


def stop_if(cancelled: Cancelled | None) -> None:
    """PatchingCancelled when the caller has asked to stop (checked between forwards)."""
    if cancelled is not None and cancelled():
        raise PatchingCancelled("edge analysis cancelled")


@dataclass(frozen=True)
class ComponentGraph:
    """The writers, readers and edges of a decoder-only model with ``n_layers`` layers
    of ``n_heads`` heads; ``mlp``: the layers have a feed-forward; ``parallel``: the
    attention and the MLP both read the block's input (GPT-NeoX)."""

    n_layers: int
    n_heads: int
    mlp: bool = True
    parallel: bool = False

    @property
    def per_layer_writers(self) -> int:
        return self.n_heads + int(self.mlp)

    @property
    def per_layer_readers(self) -> int:
        return 3 * self.n_heads + int(self.mlp)

    @property
    def n_writers(self) -> int:
        return 1 + self.n_layers * self.per_layer_writers

    @property
    def n_readers(self) -> int:
        return self.n_layers * self.per_layer_readers + 1

    def head_writer(self, layer: int, head: int) -> int:
        return 1 + layer * self.per_layer_writers + head

    def mlp_writer(self, layer: int) -> int:
        return 1 + layer * self.per_layer_writers + self.n_heads

    def writers_before(self, layer: int) -> int:
        """How many writers come before layer ``layer``'s attention (``input`` and earlier layers)."""
        return 1 + layer * self.per_layer_writers

    def head_reader(self, layer: int, head: int, which: str) -> int:
        return layer * self.per_layer_readers + QKV.index(which) * self.n_heads + head

    def mlp_reader(self, layer: int) -> int:
        return layer * self.per_layer_readers + 3 * self.n_heads

    @property
    def logits_reader(self) -> int:
        return self.n_layers * self.per_layer_readers

    @cached_property
    def writer_names(self) -> list[str]:
        names = ["input"]
        for layer in range(self.n_layers):
            names += [f"a{layer}.h{h}" for h in range(self.n_heads)]
            names += [f"m{layer}"] if self.mlp else []
        return names

    @cached_property
    def reader_names(self) -> list[str]:
        names: list[str] = []
        for layer in range(self.n_layers):
            names += [f"a{layer}.h{h}<{x}>" for x in QKV for h in range(self.n_heads)]
            names += [f"m{layer}"] if self.mlp else []
        return [*names, "logits"]

    @cached_property
    def allowed(self) -> Tensor:
        """(writers, readers) bool: True where the edge exists."""
        mask = torch.zeros(self.n_writers, self.n_readers, dtype=torch.bool)
        for layer in range(self.n_layers):
            start = layer * self.per_layer_readers
            mask[: self.writers_before(layer), start : start + 3 * self.n_heads] = True
            if self.mlp:
                last = self.writers_before(layer) + (0 if self.parallel else self.n_heads)
                mask[:last, self.mlp_reader(layer)] = True
        mask[:, self.logits_reader] = True
        return mask

    @property
    def n_edges(self) -> int:
        return int(self.allowed.sum())

    def edge_name(self, writer: int, reader: int) -> str:
        return f"{self.writer_names[writer]}->{self.reader_names[reader]}"

    def writer_index(self, name: str) -> int:
        """The index of a writer named ``input``, ``a{L}.h{H}`` or ``m{L}``; EdgeError if none."""
        if name == "input":
            return 0
        head = _HEAD.match(name)
        if head is not None:
            layer, h = int(head[1]), int(head[2])
            self.check_head(layer, h)
            return self.head_writer(layer, h)
        mlp = _MLP.match(name)
        if mlp is not None and self.mlp and int(mlp[1]) < self.n_layers:
            return self.mlp_writer(int(mlp[1]))
        raise EdgeError(f"no writer {name!r}: input, a{{L}}.h{{H}} or m{{L}} of this model")

    def reader_index(self, name: str) -> int:
        """The index of a reader named ``a{L}.h{H}<q|k|v>``, ``m{L}`` or ``logits``; EdgeError if none."""
        if name == "logits":
            return self.logits_reader
        head = _HEAD_READER.match(name)
        if head is not None:
            layer, h = int(head[1]), int(head[2])
            self.check_head(layer, h)
            return self.head_reader(layer, h, head[3])
        mlp = _MLP.match(name)
        if mlp is not None and self.mlp and int(mlp[1]) < self.n_layers:
            return self.mlp_reader(int(mlp[1]))
        raise EdgeError(f"no reader {name!r}: a{{L}}.h{{H}}<q|k|v>, m{{L}} or logits of this model")

    def edge_index(self, name: str) -> tuple[int, int]:
        """(writer, reader) of an edge named ``writer->reader``; EdgeError when it does not exist."""
        parts = name.split("->")
        if len(parts) != 2:
            raise EdgeError(f"an edge is named writer->reader (a0.h1->a1.h3<k>), got {name!r}")
        w, r = self.writer_index(parts[0].strip()), self.reader_index(parts[1].strip())
        if not bool(self.allowed[w, r]):
            raise EdgeError(f"no edge {name}: {parts[0]} writes after {parts[1]} reads")
        return w, r

    def check_head(self, layer: int, head: int) -> None:
        """EdgeError in one line when the head is not in the model."""
        if not (0 <= layer < self.n_layers and 0 <= head < self.n_heads):
            raise EdgeError(
                f"no head a{layer}.h{head}: the model has {self.n_layers} layers of {self.n_heads} heads"
            )

    def reader_layer(self, reader: int) -> int:
        """The layer a reader sits in (``n_layers`` for the logits)."""
        return reader // self.per_layer_readers
