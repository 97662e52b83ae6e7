"""What every family's reference test checks, against ``transformers`` on a
``save_pretrained`` folder (``bench/hf_factory.py``):

- logits within 1e-4 of the reference's (fp32);
- every layer's attention weights within 1e-5 of ``output_attentions=True``;
- the parameter count (the lab's ``parameter_report`` total, tied weights
  once) equal to ``num_parameters()``;
- a greedy continuation of 32 tokens, the lab's ``DecoderOnly`` with its KV
  cache, identical to ``generate(do_sample=False)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from tui_lab.core.model.capture import capture_attention
from tui_lab.core.model.params import parameter_report
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.files import open_tensors, read_config

PROMPT_LEN = 10
NEW_TOKENS = 32


def load_lab(folder: Path) -> tuple[Any, Any]:
    """(ModelConfig, DecoderOnly) of a folder, read the way the lab reads it."""
    return build_pretrained(read_config(folder), open_tensors(folder))


def prompt(vocab: int = 300, length: int = PROMPT_LEN, batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def assert_logits_match(reference: Any, model: Any, tokens: torch.Tensor) -> None:
    with torch.no_grad():
        want = reference(tokens).logits
        got = model(tokens)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def assert_attention_matches(reference: Any, model: Any, tokens: torch.Tensor) -> None:
    with torch.no_grad():
        want = reference(tokens, output_attentions=True).attentions
        with capture_attention(model) as store:
            model(tokens)
    got = store.matrices()
    assert len(want) == len(got) == model.config.n_decoder_layers
    for i, w in enumerate(want):
        g = got[f"decoder.{i}.self"]
        assert g.shape == w.shape  # (B, n_heads, T, T): one map per query head
        torch.testing.assert_close(g, w, atol=1e-5, rtol=0)


def assert_parameter_count_matches(reference: Any, config: Any) -> None:
    report = parameter_report(config, config.vocab_size)
    assert report.total == reference.num_parameters()


def lab_greedy(model: Any, tokens: torch.Tensor, steps: int = NEW_TOKENS) -> torch.Tensor:
    """Greedy decoding with the lab's KV cache: the prompt once, then one token a step."""
    cache = model.new_cache()
    out = [tokens]
    with torch.no_grad():
        logits = model(tokens, cache)
        for _ in range(steps):
            nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
            out.append(nxt)
            logits = model(nxt, cache)
    return torch.cat(out, dim=1)


def reference_greedy(reference: Any, tokens: torch.Tensor, steps: int = NEW_TOKENS) -> torch.Tensor:
    """``generate(do_sample=False)``, with no end-of-text stop, so it runs all ``steps``."""
    reference.generation_config.eos_token_id = None
    with torch.no_grad():
        out = reference.generate(
            tokens, attention_mask=torch.ones_like(tokens), do_sample=False,
            max_new_tokens=steps, eos_token_id=None, pad_token_id=0,
        )
    assert out.shape == (tokens.size(0), tokens.size(1) + steps)
    return out


def assert_greedy_matches(reference: Any, model: Any, tokens: torch.Tensor) -> None:
    assert torch.equal(lab_greedy(model, tokens), reference_greedy(reference, tokens))


def rewrite(
    folder: Path,
    to: Path,
    tensors: Callable[[dict[str, torch.Tensor]], Mapping[str, torch.Tensor]] | None = None,
    config: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Path:
    """A copy of ``folder`` with its tensors and/or config.json changed (another key layout)."""
    to.mkdir(parents=True, exist_ok=True)
    state = load_file(folder / "model.safetensors")
    state = dict(tensors(state)) if tensors else state
    save_file({k: v.contiguous() for k, v in state.items()}, to / "model.safetensors")
    raw = json.loads((folder / "config.json").read_text())
    (to / "config.json").write_text(json.dumps(config(raw) if config else raw))
    return to


def without_prefix(prefix: str) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    return lambda state: {k.removeprefix(prefix): v for k, v in state.items()}
