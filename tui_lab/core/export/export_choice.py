"""Which Hugging Face family represents a lab model exactly, or the one setting that stands in the way.

- LayerNorm, learned or sinusoidal positions: ``gpt2`` (``gpt_neo`` when the
  model has local attention windows, or GPT-Neo's own unscaled scores and
  bias-free q/k/v);
- LayerNorm, rotary positions: ``gpt_neox`` (its parallel residual on or off
  as the lab's);
- RMSNorm, a gated MLP, rotary positions over whole heads: ``llama``.

What every family can absorb is absorbed by the export (``export_weights.py``):
the lab's sqrt(d_model) embedding scale (into an untied embedding), a
sinusoidal table (as learned rows), a score scale (into w_q), missing biases
(zeros), shared key/value heads (repeated). Everything else is refused here,
in one line naming the setting.
"""

from __future__ import annotations

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.gpt2_writer import WRITER as GPT2
from tui_lab.core.pretrained.families.gpt_neo_writer import WRITER as GPT_NEO
from tui_lab.core.pretrained.families.gpt_neox_writer import WRITER as GPT_NEOX
from tui_lab.core.pretrained.families.llama_writer import WRITER as LLAMA
from tui_lab.core.pretrained.families.writer import Writer


class ExportError(PretrainedError):
    """A lab model no family represents exactly, or an export that cannot be written."""


def _refuse(setting: str, why: str) -> ExportError:
    return ExportError(f"cannot export: {setting}: {why}")


def choose_writer(config: ModelConfig) -> Writer:
    """The family that represents ``config``'s model exactly; ExportError naming the setting if none."""
    c = config
    if c.shape is not Shape.DECODER_ONLY:
        raise _refuse(f"model.arch {c.arch}", "only decoder-only models have a causal-LM family")
    if c.norm != "pre":
        raise _refuse(f"model.norm {c.norm}", "every family is pre-LN (a norm before each sub-layer)")
    if c.d_ff == 0:
        raise _refuse("model.d_ff 0", "every family has a feed-forward in each layer (no attention-only blocks)")
    windowed = any(c.attention_windows)
    if c.norm_kind == "rmsnorm":
        return _llama(c, windowed)
    if c.gated_ff:
        raise _refuse("model.gated_ff true with norm_kind layernorm", "the one family with a gated MLP (llama) uses RMSNorm")
    if c.positional == "rope":
        if windowed:
            raise _refuse("model.attention_windows with rope", "the one family with local windows (gpt_neo) has learned positions")
        return GPT_NEOX
    if c.parallel_residual:
        raise _refuse(
            f"model.parallel_residual with positional {c.positional}",
            "the one family with a parallel residual (gpt_neox) has rotary positions",
        )
    if windowed or (c.score_scale == 1.0 and not c.qkv_bias):
        return _gpt_neo(c)
    return GPT2


def _llama(c: ModelConfig, windowed: bool) -> Writer:
    if not c.gated_ff:
        raise _refuse("model.norm_kind rmsnorm without gated_ff", "the one RMSNorm family (llama) has a gated MLP")
    if c.positional != "rope":
        raise _refuse(f"model.positional {c.positional} with rmsnorm", "the one RMSNorm family (llama) has rotary positions")
    if c.rope_fraction != 1.0:
        raise _refuse(f"model.rope_fraction {c.rope_fraction:g} with rmsnorm", "llama rotates whole heads")
    if c.parallel_residual:
        raise _refuse("model.parallel_residual with rmsnorm", "llama's residual is sequential")
    if windowed:
        raise _refuse("model.attention_windows with rmsnorm", "llama's attention is global in every layer")
    return LLAMA


def _gpt_neo(c: ModelConfig) -> Writer:
    sizes = sorted({w for w in c.attention_windows if w})
    if len(sizes) > 1:
        raise _refuse(
            f"model.attention_windows {list(c.attention_windows)}",
            "gpt_neo has one window size for all its local layers",
        )
    if c.qkv_bias:
        raise _refuse("model.qkv_bias true with attention_windows", "gpt_neo's q/k/v have no biases")
    return GPT_NEO
