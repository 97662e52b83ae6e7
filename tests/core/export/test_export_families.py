"""Every exportable lab configuration, exported, against ``transformers`` and the lab's reader.

Each case is a run of a random-weight lab model (``export_runs.py``). Its
export must load in ``transformers`` (``AutoModelForCausalLM``, no custom
code) with logits within 1e-4 of the lab model's and the same 32-token greedy
continuation (the lab's KV cache against ``generate(do_sample=False)``, each
step's logits within 1e-4 as well), be of
the family that represents it, and reopen in the lab (``open_files``, what
``--model DIR`` runs) with the run's logits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.core.pretrained.export_runs import save_run
from tests.core.pretrained.family_reference import NEW_TOKENS
from tui_lab.core.export.export_hf import export_hf
from tui_lab.core.opening.from_files import open_files

transformers = pytest.importorskip("transformers")

# name: (the lab's model settings, the family it must be written as)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    # The lab's defaults: tied head, embeddings scaled by sqrt(d_model) -> an untied GPT-2.
    "learned-scaled-tied": (dict(positional="learned"), "gpt2"),
    "sinusoidal-gelu-unscaled-tied": (
        dict(positional="sinusoidal", activation="gelu", scale_embeddings=False), "gpt2"
    ),
    "learned-no-biases-gqa-score-scale": (
        dict(positional="learned", activation="gelu_tanh", tie_embeddings=False, qkv_bias=False,
             out_bias=False, ff_bias=False, n_kv_heads=2, score_scale=0.5),
        "gpt2",
    ),
    # The shipped char-lm preset's options: rotary over whole heads, relu, tied and scaled.
    "rope-scaled-tied": (dict(positional="rope"), "gpt_neox"),
    "rope-partial-scaled-tied": (dict(positional="rope", rope_fraction=0.5), "gpt_neox"),
    "rope-parallel-silu-untied": (
        dict(positional="rope", parallel_residual=True, activation="silu", tie_embeddings=False,
             out_bias=False, rope_base=500.0),
        "gpt_neox",
    ),
    "rope-unscaled-tied": (dict(positional="rope", scale_embeddings=False), "gpt_neox"),
    "llama-gqa-scaled": (
        dict(positional="rope", norm_kind="rmsnorm", gated_ff=True, activation="silu", n_kv_heads=2,
             norm_eps=1e-6),
        "llama",
    ),
    "llama-gelu-no-biases-unscaled-tied": (
        dict(positional="rope", norm_kind="rmsnorm", gated_ff=True, activation="gelu", qkv_bias=False,
             out_bias=False, ff_bias=False, scale_embeddings=False),
        "llama",
    ),
    # Unscaled scores: GPT-2's scale_attn_weights false; with bias-free q/k/v, GPT-Neo's own.
    "learned-unscaled-scores": (dict(positional="learned", score_scale=1.0), "gpt2"),
    "learned-unscaled-scores-no-qkv-bias": (
        dict(positional="learned", score_scale=1.0, qkv_bias=False, scale_embeddings=False), "gpt_neo"
    ),
    "windows-learned": (
        dict(positional="learned", attention_windows=(0, 4), qkv_bias=False, activation="gelu_tanh"),
        "gpt_neo",
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, Path]:
    """(case name, the run's lab model, its exported folder)."""
    name = request.param
    base = tmp_path_factory.mktemp(name)
    run, model = save_run(base / "run", **CASES[name][0])
    result = export_hf(run, base / "hf")
    assert result.folder == base / "hf"
    return name, model, result.folder


def lab_steps(model: Any, ids: torch.Tensor, steps: int = NEW_TOKENS) -> tuple[torch.Tensor, torch.Tensor]:
    """The lab's greedy continuation with its KV cache: (the sequences, each step's logits (B, steps, V))."""
    cache, seqs, logits_seen = model.new_cache(), [ids], []
    with torch.no_grad():
        logits = model(ids, cache)[:, -1]
        for _ in range(steps):
            logits_seen.append(logits)
            seqs.append(logits.argmax(-1, keepdim=True))
            logits = model(seqs[-1], cache)[:, -1]
    return torch.cat(seqs, dim=1), torch.stack(logits_seen, dim=1)


def reference_steps(reference: Any, ids: torch.Tensor, steps: int = NEW_TOKENS) -> tuple[torch.Tensor, torch.Tensor]:
    """``generate(do_sample=False)`` with no end-of-text stop: (the sequences, each step's raw logits)."""
    reference.generation_config.eos_token_id = None
    with torch.no_grad():
        out = reference.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=steps,
            eos_token_id=None, pad_token_id=0, output_logits=True, return_dict_in_generate=True,
        )
    return out.sequences, torch.stack(out.logits, dim=1)


def tokens(vocab: int, batch: int = 2, length: int = 10) -> torch.Tensor:
    return torch.randint(5, vocab, (batch, length), generator=torch.Generator().manual_seed(1))


def test_written_as_the_family_that_represents_it(exported: tuple[str, Any, Path]) -> None:
    name, _, folder = exported
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == CASES[name][1]
    assert "auto_map" not in config  # no custom code
    generation = json.loads((folder / "generation_config.json").read_text())
    assert (generation["bos_token_id"], generation["eos_token_id"], generation["pad_token_id"]) == (1, 2, 0)


def test_transformers_logits_and_greedy_continuation_match(exported: tuple[str, Any, Path]) -> None:
    _, model, folder = exported
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = tokens(model.vocab_size)
    with torch.no_grad():
        want, got = model(ids), reference(ids).logits
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    # Every step's logits too, not only its argmax (a random model's continuation often
    # repeats one token, which a wrong position past the prompt would not change).
    theirs, their_logits = reference_steps(reference, ids)
    ours, our_logits = lab_steps(model, ids)
    assert torch.equal(theirs, ours)
    torch.testing.assert_close(their_logits, our_logits, atol=1e-4, rtol=0)


def test_reopens_in_the_lab_with_the_runs_logits(exported: tuple[str, Any, Path]) -> None:
    _, model, folder = exported
    opened = open_files(str(folder))
    ids = tokens(model.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(opened.model(ids), model(ids), atol=1e-5, rtol=0)
    assert len(opened.task.vocab) == model.vocab_size
