"""Parameter report: totals from the architecture formula, rows, tying, FLOPs."""

from __future__ import annotations

import json

import torch

from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.model.models import build_model
from tui_lab.core.model.params import parameter_report, report_for_model

D, H, FF, N, V = 512, 8, 2048, 6, 37000


def paper_base(**kw: object) -> ModelConfig:
    """ "Attention Is All You Need", base model: shared 37000-token vocabulary, tied head."""
    settings = dict(
        arch="encoder-decoder",
        d_model=D,
        n_heads=H,
        n_encoder_layers=N,
        n_decoder_layers=N,
        d_ff=FF,
        norm="post",
        positional="sinusoidal",
        max_len=512,
        share_embeddings=True,
        tie_embeddings=True,
    )
    settings.update(kw)
    return ModelConfig(**settings)


# The architecture formula, term by term.
ATTN = 4 * (D * D + D)  # w_q, w_k, w_v, w_o with biases
FFN = (D * FF + FF) + (FF * D + D)  # lin1, lin2 with biases
LN = 2 * D  # gain and bias
ENC_LAYER = ATTN + FFN + 2 * LN
DEC_LAYER = 2 * ATTN + FFN + 3 * LN  # self + cross attention, three norms
EMBED = V * D  # counted once: shared by source and target, tied to the head
PAPER_BASE_TOTAL = EMBED + N * ENC_LAYER + N * DEC_LAYER


def test_paper_base_total_matches_the_formula() -> None:
    assert PAPER_BASE_TOTAL == 63_082_496
    report = parameter_report(paper_base(), vocab_size=V)
    assert report.total == PAPER_BASE_TOTAL
    assert sum(r.params for r in report.rows) == report.total
    assert report.fp32_bytes == 4 * PAPER_BASE_TOTAL
    assert report.bf16_bytes == 2 * PAPER_BASE_TOTAL
    assert report.train_bytes == 16 * PAPER_BASE_TOTAL


def test_rows_by_component() -> None:
    rows = {r.name: r for r in parameter_report(paper_base(), vocab_size=V).rows}
    assert rows["src_embed"].params == EMBED
    assert rows["tgt_embed"].params == 0 and "src_embed" in rows["tgt_embed"].note
    assert rows["lm_head"].params == 0 and "tied" in rows["lm_head"].note
    for kind in ("self_attn", "cross_attn"):
        for w in ("w_q", "w_k", "w_v", "w_o"):
            assert rows[f"decoder.5.{kind}.{w}"].params == D * D + D
    assert rows["encoder.0.self_attn.w_q"].group == "encoder.0"
    assert rows["encoder.3.ff"].params == FFN
    assert rows["encoder.3.norms"].params == 2 * LN
    assert rows["decoder.0.norms"].params == 3 * LN
    assert "encoder.norm" not in rows and "pos" not in rows  # post-LN, sinusoidal
    groups = parameter_report(paper_base(), vocab_size=V).groups()
    assert groups["decoder.2"] == DEC_LAYER and groups["embeddings"] == EMBED


def test_tying_and_sharing_are_counted_once() -> None:
    untied = parameter_report(paper_base(tie_embeddings=False), vocab_size=V)
    assert untied.total == PAPER_BASE_TOTAL + V * D
    assert {r.name: r.params for r in untied.rows}["lm_head"] == V * D
    unshared = parameter_report(paper_base(share_embeddings=False), vocab_size=V)
    assert unshared.total == PAPER_BASE_TOTAL + V * D
    assert {r.name: r.params for r in unshared.rows}["tgt_embed"] == V * D


def test_pre_ln_learned_positions_and_decoder_only() -> None:
    pre = parameter_report(paper_base(norm="pre"), vocab_size=V)
    assert pre.total == PAPER_BASE_TOTAL + 2 * LN  # encoder.norm and decoder.norm
    learned = parameter_report(paper_base(positional="learned"), vocab_size=V)
    assert learned.total == PAPER_BASE_TOTAL + 512 * D
    assert {r.name: r.params for r in learned.rows}["pos"] == 512 * D
    rope = parameter_report(paper_base(positional="rope"), vocab_size=V)
    assert rope.total == PAPER_BASE_TOTAL  # rotations have no parameters
    gpt = parameter_report(paper_base(arch="decoder-only", norm="pre"), vocab_size=V)
    assert gpt.total == EMBED + N * ENC_LAYER + LN  # GPT blocks are encoder-shaped + final norm


def test_report_agrees_with_a_real_model_and_counts_unique_tensors() -> None:
    cfg = ModelConfig(
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=1,
        d_ff=48,
        positional="learned",
        max_len=20,
    )
    model = build_model(cfg, 30)
    unique = {id(p): p.numel() for p in model.parameters()}
    report = report_for_model(model, context_len=20)
    assert report.total == sum(unique.values()) == parameter_report(cfg, 30).total
    assert sum(r.params for r in report.rows) == report.total
    assert [r.name for r in report.rows] == [r.name for r in parameter_report(cfg, 30).rows]


def test_flops_per_token_from_the_formula() -> None:
    c = 100
    report = parameter_report(paper_base(), vocab_size=V, context_len=c)
    n_layers = N * ENC_LAYER + N * DEC_LAYER  # every stack weight is used once per token
    head = D * V  # the output projection runs even though its weight is tied
    attention = (
        4 * c * D * (N + 2 * N)
    )  # QK^T and AV over c keys: encoder self, decoder self + cross
    assert report.infer_flops_per_token == 2 * (n_layers + head) + attention
    assert report.train_flops_per_token == 3 * report.infer_flops_per_token
    assert report.non_embedding == n_layers
    assert parameter_report(paper_base(), vocab_size=V).context_len == 512  # default: max_len


def test_config_vocab_wins_and_json_shape() -> None:
    cfg = ModelConfig(d_model=16, n_heads=2, vocab_size=40)
    a, b = parameter_report(cfg, vocab_size=10), parameter_report(cfg, vocab_size=999)
    assert a.total == b.total
    data = json.loads(json.dumps(a.to_dict()))
    assert data["total"] == a.total
    assert {"name", "params"} <= set(data["rows"][0])


def test_builds_once_per_config_on_the_meta_device_and_allocates_nothing(monkeypatch) -> None:
    """Cheap enough for every keystroke: a config seen before builds nothing; a new one builds
    once, on the meta device (no memory), so even a model too large to allocate is reported."""
    import tui_lab.core.model.models as models

    built: list[set[str]] = []
    real_build = models.build_model

    def counting_build(*args, **kwargs):  # type: ignore[no-untyped-def]
        model = real_build(*args, **kwargs)
        built.append({p.device.type for p in model.parameters()})
        return model

    monkeypatch.setattr(models, "build_model", counting_build)
    config = paper_base(d_ff=1999)  # no other test asks about this one
    report = parameter_report(config, vocab_size=V)
    assert built == [{"meta"}]
    assert parameter_report(paper_base(d_ff=1999), vocab_size=V) == report  # an equal config: cached
    assert len(built) == 1
    parameter_report(config, vocab_size=V + 1)  # another vocabulary is another model
    assert len(built) == 2
    huge = parameter_report(paper_base(d_model=8192, n_heads=64, d_ff=32768), vocab_size=V)
    assert huge.total > 10**9 and built[-1] == {"meta"}
    assert torch.empty(0).device.type == "cpu"  # the meta device context did not leak
