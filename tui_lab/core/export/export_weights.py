"""A lab model's weights as a family's checkpoint tensors, by inverting the family's reader.

Two steps:

1. ``adapt``: the parameters of the model the family's file describes (the
   reader's ``ModelConfig``) that compute what the lab model computes. The
   lab's sqrt(d_model) scale is multiplied into the embedding (whose head is
   then untied and keeps the unscaled matrix), a sinusoidal table becomes the
   learned rows it adds, a score scale other than the family's is multiplied
   into w_q (and its bias), shared key/value heads are repeated for the query
   heads that read them, and a bias the lab model lacks is zero.
2. ``invert``: every element of the family's layout is numbered, the reader
   maps the numbered tensors onto lab names (its transposes, splits and
   per-head interleaving act on the numbers), and each lab tensor is written
   back to the positions its numbers name. Every element must be written
   exactly once, so the file reads back, through the same reader, as exactly
   these weights.
"""

from __future__ import annotations

import itertools
import math

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.models import DecoderOnly
from tui_lab.core.model.positions import SinusoidalPositions, sinusoid_table
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.common import Family
from tui_lab.core.pretrained.families.writer import Layout

State = dict[str, torch.Tensor]


def _scale(config: ModelConfig) -> float:
    return config.score_scale if config.score_scale is not None else config.d_head**-0.5


def adapt(model: DecoderOnly, target: ModelConfig) -> State:
    """The parameters of a ``target`` model computing what ``model`` computes (see the module)."""
    source: ModelConfig = model.config
    state = {name: t.detach() for name, t in model.state_dict().items()}
    out: State = {}
    embed = state["tgt_embed.weight"]
    out["tgt_embed.weight"] = embed * model.embed_scale if not target.scale_embeddings else embed
    if not target.tie_embeddings:
        out["lm_head.weight"] = state["lm_head.weight"]  # the unscaled matrix when the lab ties it
    if target.positional == "learned":
        if source.positional == "learned":
            out["pos.weight"] = state["pos.weight"]
        else:  # the sinusoids the lab adds, as rows of a table
            pos = model.pos
            table = pos.pe if isinstance(pos, SinusoidalPositions) else sinusoid_table(source.max_len, source.d_model)
            out["pos.weight"] = table[: source.max_len].to(embed.dtype)
    ratio = _scale(source) / _scale(target)
    group = target.kv_heads // source.kv_heads
    for name, tensor in state.items():
        if not name.startswith("decoder."):
            continue
        if ratio != 1.0 and ".self_attn.w_q." in name:
            tensor = tensor * ratio  # q . k * s == (q * s / s') . k * s'
        if group > 1 and (".self_attn.w_k." in name or ".self_attn.w_v." in name):
            heads = tensor.reshape(source.kv_heads, source.d_head, *tensor.shape[1:])  # (kv, d_head, ...)
            tensor = heads.repeat_interleave(group, dim=0).reshape(-1, *tensor.shape[1:])
        out[name] = tensor
    return _with_zero_biases(out, target)


def _with_zero_biases(state: State, target: ModelConfig) -> State:
    """``state`` with a zero bias wherever the ``target`` model has one the lab's lacks."""
    with torch.device("meta"):
        shapes = DecoderOnly(target, target.vocab_size or 0).state_dict()
    if target.tie_embeddings:
        shapes.pop("lm_head.weight")
    dtype = state["tgt_embed.weight"].dtype
    for name, meta in shapes.items():
        if name not in state and name.endswith(".bias"):
            state[name] = torch.zeros(meta.shape, dtype=dtype)
    missing, extra = sorted(set(shapes) - set(state)), sorted(set(state) - set(shapes))
    wrong = [n for n in shapes if n in state and state[n].shape != shapes[n].shape]
    if missing or extra or wrong:
        # The family's model and the lab's disagree beyond what adapt absorbs: the lab's fault.
        raise PretrainedError(
            f"export: the weights do not fit the written model (missing {missing[:2]}, "
            f"extra {extra[:2]}, reshaped {wrong[:2]})"
        )
    return state


def invert(family: Family, layout: Layout, config: ModelConfig, state: State) -> State:
    """The family's tensors (``layout``'s names and shapes) that its reader maps onto ``state``."""
    sizes = [math.prod(shape) for shape in layout.values()]
    total = sum(sizes)
    # int32 numbers while they fit (half the memory of int64: the probe is as large as the model).
    numbers = torch.arange(total, dtype=torch.int32 if total < 2**31 else torch.int64)
    probes = {
        name: part.view(shape) for (name, shape), part in zip(layout.items(), numbers.split(sizes), strict=True)
    }
    mapped = family.lab_state_dict(probes, config)
    if set(mapped) != set(state):
        raise PretrainedError(
            f"export: {family.model_type}'s reader maps {sorted(set(mapped) ^ set(state))[:3]} "
            "differently from the lab's model"
        )
    dtype = state["tgt_embed.weight"].dtype
    flat = torch.zeros(total, dtype=dtype)
    written = torch.zeros(total, dtype=torch.bool)
    for name, where in mapped.items():
        index = where.reshape(-1)
        flat[index] = state[name].reshape(-1).to(dtype)
        written[index] = True
    # Every element written, and as many writes as elements: each exactly once.
    if not bool(written.all()) or sum(t.numel() for t in mapped.values()) != total:
        unwritten = (~written).nonzero()
        first = int(unwritten[0]) if len(unwritten) else 0
        name = next(n for n, end in zip(layout, itertools.accumulate(sizes), strict=True) if first < end)
        raise PretrainedError(f"export: {name} is not written exactly once by {family.model_type}'s mapping")
    # One tensor each (safetensors refuses tensors that share storage).
    return {name: part.view(shape).clone() for (name, shape), part in zip(layout.items(), flat.split(sizes), strict=True)}
