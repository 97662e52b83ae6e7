"""Parameter breakdown, memory and FLOPs per token, for the Params pane and CLI.

What a count counts: every **unique** parameter tensor element. A tensor
reachable under several names (``src_embed``/``tgt_embed`` when embeddings are
shared, ``lm_head`` tied to ``tgt_embed``) is counted once, under the first
name; the other names get a row with 0 and a note saying what they share.
Buffers (the sinusoidal table, RoPE's cos/sin) are not parameters and are not
counted. So ``sum(row.params) == total == sum(p.numel() for p in model.parameters())``.

FLOPs per token (multiply and add counted as 2), with ``C = context_len``:

- a weight matrix of N elements applied to one token costs ``2 N``;
- each attention module costs ``2 C d_model`` for ``Q K^T`` plus
  ``2 C d_model`` for ``weights @ V``, i.e. ``4 C d_model`` (the full-context
  upper bound: a causal query at position t really sees t + 1 keys);
- ``inference = 2 (N_layers + d_model V) + 4 C d_model n_attn`` where
  ``N_layers`` is every parameter of the encoder/decoder stacks (embeddings
  and position tables are lookups: no FLOPs), ``d_model V`` is the output
  projection (costed even when tied: the multiply still happens) and
  ``n_attn`` counts attention modules a token passes through: decoder-only
  ``n_layers``; encoder-decoder ``n_enc + 2 n_dec`` (self + cross), "per
  token" meaning one source token and one target token, source length = target
  length = C;
- a local attention window ``w`` (``attention_windows``) caps a decoder
  layer's self-attention at ``min(C, w)`` keys in place of ``C``; fewer
  key/value heads (grouped-query) shrink ``w_k``/``w_v`` (counted in
  ``N_layers``) but not the score products, which every query head still makes;
- ``training = 3 x inference`` (backward costs about twice the forward).

Compared with Kaplan et al. (2020), who give ``2 N + 2 n_layer C d_attn``, this
also counts the ``weights @ V`` product and the cross attention.

Memory: ``total * 4`` bytes in fp32, ``total * 2`` in bf16; training with AdamW
in fp32 needs about ``total * 16`` (weights, gradients, two moments), before
activations.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from tui_lab.core.config.lab_config import TRAIN_BYTES_PER_PARAM, ModelConfig
from tui_lab.core.config.shape import Shape


@dataclass(frozen=True)
class ParamRow:
    """One line of the breakdown. ``group`` is what the row belongs to
    (``embeddings``, ``encoder.0``, ``decoder.1``, ``final norms``, ``output head``);
    ``note`` explains a 0 (``tied to tgt_embed.weight``)."""

    name: str
    params: int
    group: str
    note: str = ""


@dataclass(frozen=True)
class ParamReport:
    """The breakdown plus totals; see the module docstring for what is counted."""

    rows: tuple[ParamRow, ...]
    total: int
    fp32_bytes: int
    bf16_bytes: int
    train_flops_per_token: int
    infer_flops_per_token: int
    non_embedding: int = 0
    train_bytes: int = 0
    context_len: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    def groups(self) -> dict[str, int]:
        """Parameter count per group, in row order."""
        out: dict[str, int] = {}
        for row in self.rows:
            out[row.group] = out.get(row.group, 0) + row.params
        return out

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: ``{"total": n, "rows": [{"name", "params", "group", "note"}], ...}``."""
        data = asdict(self)
        data.pop("extra")
        data.update(self.extra)
        return data


def _row_of(name: str) -> tuple[str, str]:
    """Parameter name -> (row name, group)."""
    parts = name.split(".")
    top = parts[0]
    if top in ("src_embed", "tgt_embed", "pos", "type_embed", "embed_norm"):
        return top, "embeddings"
    if top in ("lm_head", "mlm"):  # mlm: an encoder-only model's head before the unembedding
        return ("mlm_head" if top == "mlm" else top), "output head"
    if top in ("encoder", "decoder") and len(parts) > 1:
        if parts[1] == "norm":
            return f"{top}.norm", "final norms"
        if parts[1] == "layers" and len(parts) >= 5:
            group = f"{top}.{parts[2]}"
            sub = parts[3]
            if sub.endswith("attn"):
                return f"{group}.{sub}.{parts[4]}", group  # e.g. decoder.0.cross_attn.w_q
            if sub.startswith("norm"):
                return f"{group}.norms", group
            return f"{group}.{sub}", group
    return ".".join(parts[:-1]) or name, "other"


@dataclass
class _Tally:
    """One row's count as the parameters are walked."""

    params: int
    group: str
    note: str = ""


def report_for_model(model: nn.Module, context_len: int) -> ParamReport:
    """Breakdown of an already built model (real or on the meta device)."""
    rows: dict[str, _Tally] = {}
    owner: dict[int, str] = {}  # id(tensor) -> first parameter name
    for name, p in model.named_parameters(remove_duplicate=False):
        row, group = _row_of(name)
        entry = rows.setdefault(row, _Tally(0, group))
        if id(p) in owner:
            if not entry.params:
                verb = "shared with" if row.endswith("embed") else "tied to"
                entry.note = f"{verb} {owner[id(p)]}"
            continue
        owner[id(p)] = name
        entry.params += p.numel()
    out_rows = tuple(ParamRow(name, t.params, t.group, t.note) for name, t in rows.items())
    total = sum(r.params for r in out_rows)

    embedding = sum(r.params for r in out_rows if r.group == "embeddings")
    stacks = sum(r.params for r in out_rows if r.group not in ("embeddings", "output head"))
    config: ModelConfig | None = getattr(model, "config", None)
    vocab = int(getattr(model, "vocab_size", 0))
    d = config.d_model if config else 0
    infer = 2 * (stacks + d * vocab) + 4 * d * _keys_attended(config, context_len)
    return ParamReport(
        rows=out_rows,
        total=total,
        fp32_bytes=total * 4,
        bf16_bytes=total * 2,
        train_flops_per_token=3 * infer,
        infer_flops_per_token=infer,
        non_embedding=total - embedding,
        train_bytes=total * TRAIN_BYTES_PER_PARAM,
        context_len=context_len,
    )


def _keys_attended(config: ModelConfig | None, context_len: int) -> int:
    """Keys one token's attention modules read in all, at full context (windows capped)."""
    if config is None:
        return 0
    if config.shape is Shape.ENCODER_ONLY:  # every layer reads the whole sequence
        return config.n_encoder_layers * context_len
    windows = config.attention_windows or (0,) * config.n_decoder_layers
    decoder_self = sum(min(context_len, w) if w else context_len for w in windows)
    if config.shape is Shape.ENCODER_DECODER:  # encoder self + decoder cross read the whole source
        return decoder_self + (config.n_encoder_layers + config.n_decoder_layers) * context_len
    return decoder_self


@functools.lru_cache(maxsize=64)
def _cached_report(config: ModelConfig, vocab_size: int, context_len: int) -> ParamReport:
    from tui_lab.core.model.models import (
        build_model,  # models imports config; keep this module light
    )

    with torch.device("meta"):
        model = build_model(config, vocab_size)
    return report_for_model(model, context_len)


def parameter_report(
    config: ModelConfig, vocab_size: int, context_len: int | None = None
) -> ParamReport:
    """Breakdown of the model ``config`` describes, built on the meta device.

    Nothing is allocated, so any size is safe to ask about; results are cached
    per (config, vocab, context), so calling it on every keystroke is cheap.
    ``config.vocab_size`` wins over ``vocab_size`` (as in ``build_model``);
    ``context_len`` defaults to ``config.max_len``.
    """
    vocab = config.vocab_size or vocab_size
    return _cached_report(config, vocab, context_len or config.max_len)
