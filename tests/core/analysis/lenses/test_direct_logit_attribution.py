"""Direct logit attribution: the parts (every head, every MLP, the embeddings, the biases)
add up to the model's own logit difference within 1e-4 on each family and on a trained
lab run; the model's value is ``transformers``' own; a head's share worked by hand from
GPT-2's modules (its slice of ``c_proj``, the final LayerNorm's scale frozen) agrees."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.cli.helpers import DATA
from tests.core.analysis.patching.test_activation_patching import family, make_pair, run  # noqa: F401
from tui_lab.core.analysis.lenses.direct_logit_attribution import direct_logit_attribution
from tui_lab.core.opening.model_in_hand import open_model


def test_parts_sum_to_the_models_logit_difference(family: tuple[str, Any, Any]) -> None:  # noqa: F811
    name, lab, ref = family
    pair = make_pair()
    ids = torch.tensor([pair.clean])
    result = direct_logit_attribution(lab, ids, pair.answer, pair.wrong)
    last = run(ref, pair.clean, []).logits[0, -1]
    assert result.model == pytest.approx(float(last[pair.answer] - last[pair.wrong]), abs=1e-4)
    assert result.total == pytest.approx(sum(c["value"] for c in result.components), abs=1e-9)
    assert result.total == pytest.approx(result.model, abs=1e-4)
    names = [c["name"] for c in result.components]
    heads = ref.config.num_attention_heads
    assert [n for n in names if n.startswith("L1H")] == [f"L1H{h}" for h in range(heads)]
    assert "L0.mlp" in names and "embed" in names and names[-1] == "biases"
    assert ("pos_embed" in names) == (name in ("gpt2", "gpt_neo"))  # rotary families have none
    assert result.accumulated[-1]["value"] == pytest.approx(result.model, abs=1e-4)
    alone = direct_logit_attribution(lab, ids, pair.answer)  # no wrong: the answer's logit
    assert alone.total == pytest.approx(float(last[pair.answer]), abs=1e-4)
    if name == "gpt2":
        _one_head_by_hand(ref, pair, result)


def _one_head_by_hand(ref: Any, pair: Any, result: Any) -> None:
    """Layer 1 head 2's share, from GPT-2's own modules."""
    block = ref.transformer.h[1]
    seen: dict[str, torch.Tensor] = {}
    hooks = [
        (block.attn.c_proj, "pre", lambda _m, args, kwargs: seen.__setitem__("z", args[0].clone())),
        (ref.transformer.ln_f, "pre", lambda _m, args, kwargs: seen.__setitem__("final", args[0].clone())),
    ]
    run(ref, pair.clean, hooks)
    d_head = ref.config.n_embd // ref.config.n_head
    z = seen["z"][0, -1, 2 * d_head : 3 * d_head]
    out = z @ block.attn.c_proj.weight[2 * d_head : 3 * d_head]  # Conv1D: (in, out)
    final = seen["final"][0, -1]
    ln = ref.transformer.ln_f
    normed = ln.weight * (out - out.mean()) / torch.sqrt(final.var(unbiased=False) + ln.eps)
    w = ref.lm_head.weight
    want = float((normed @ (w[pair.answer] - w[pair.wrong])).detach())
    got = next(c["value"] for c in result.components if c["name"] == "L1H2")
    assert got == pytest.approx(want, abs=1e-5)
    assert abs(want) > 1e-3


def test_a_trained_run_sums_too() -> None:
    lab = open_model(DATA / "induction-run")
    ids = lab.to_tokens("tdkywbzxtdk")
    y, f = lab.task.vocab.encode("yf")
    result = direct_logit_attribution(lab, ids, y, f)
    assert result.total == pytest.approx(result.model, abs=1e-4)
    assert len(result.components) == 2 + 8 + 1  # embed, pos_embed, 2 x 4 heads, biases: no MLP


def test_an_encoder_decoder_run_sums_with_its_cross_attention_heads() -> None:
    """The lab's copy model: the decoder's residual stream at its last position is its
    embeddings, its self- and cross-attention heads and MLPs; the parts add up to the
    logit difference of the model's own forward pass (run here apart from the hooks)."""
    lab = open_model(DATA / "learned-copy")
    src = lab.to_tokens("31415")
    vocab = lab.task.vocab
    target = torch.tensor([[lab.task.decoder_start_id, *vocab.encode("31")]])
    four, nine = vocab.encode("49")
    result = direct_logit_attribution(lab, src, four, nine, target)
    with torch.no_grad():
        logits = lab.model(src, target)[0, -1]
    assert result.model == pytest.approx(float(logits[four] - logits[nine]), abs=1e-4)
    assert result.total == pytest.approx(result.model, abs=1e-4)
    names = [c["name"] for c in result.components]
    assert {"L0xH0", "L0xH1", "L1xH0", "L1xH1", "L0H0", "L1.mlp"} <= set(names) and names[-1] == "biases"


def test_an_encoder_only_model_is_refused_in_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bench.hf_factory import save_masked_lm
    from tui_lab.core.analysis.patching.patch_pair import PatchError

    save_masked_lm(tmp_path, "bert")
    lab = open_model(tmp_path)
    with pytest.raises(PatchError, match="MLM head"):
        direct_logit_attribution(lab, lab.to_tokens("the cat"), 5, 6)
