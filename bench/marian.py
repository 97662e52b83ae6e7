"""Marian (opus-mt) decoding: the lab's ``generate`` against ``transformers``' ``generate``, side by side.

``python -m bench.marian [--quick] [--threads N]``

The model: opus-mt-en-zh's shape (d_model 512, 6 + 6 layers, 8 heads, feed-forward
2,048, vocabulary 58,101, shared embeddings, swish; about 77 M parameters) with
random weights, built by ``transformers`` and written with ``save_pretrained`` to
a temporary folder beside the tests' small SentencePiece tokenizer
(``bench/hf_factory.py``; fewer pieces than the vocabulary, which the
lab accepts). The lab opens that folder with ``open_files`` (as ``--model``
does); ``transformers`` keeps the model it saved, so both hold the same weights.
The logits bias is pushed down on ``</s>`` so neither side stops early: both
translate ``NEW_TOKENS`` tokens greedily (the encoder once, the decoder with its
KV cache; the lab: the Decode pane's call without capture; ``transformers``:
``generate(num_beams=1, do_sample=False)`` with pad banned, as opus-mt's
generation config bans it). Runs alternate in one process at the same thread
count, median of ``REPEATS``; each side's tokens are compared.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

SHAPE = dict(
    d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
    decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
    max_position_embeddings=512, vocab_size=58101,
)
SOURCE = "The cat sat on the mat. The dog sat on the log. Once upon a time there was a little girl."
NEW_TOKENS = 64
REPEATS = 5
SPEED_GOAL = 1.2  # lab tokens/s over transformers'


def write_model(folder: Path) -> Any:
    """A random opus-mt-shaped MarianMTModel saved to ``folder`` with a tokenizer; the reference."""
    from bench.hf_factory import marian_config, save_marian_tokenizer

    torch.manual_seed(0)
    import transformers

    config = marian_config(**SHAPE, attn_implementation="sdpa")
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias[0, config.eos_token_id] = -1e4  # never stop early
    model.save_pretrained(folder)
    save_marian_tokenizer(folder, SHAPE["vocab_size"])
    return model


def timed(fn: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    """Print tokens/s of both sides and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats of 16 tokens")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both sides (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    repeats, new = (2, 16) if args.quick else (REPEATS, NEW_TOKENS)

    from transformers import MarianTokenizer

    from tui_lab.core.decoding.decode import generate
    from tui_lab.core.opening.from_files import open_files

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "opus-mt-shaped"
        reference = write_model(folder)
        loaded = open_files(str(folder))
        torch.set_num_threads(args.threads)  # open_files picks threads for the lab; same for both
        ids = MarianTokenizer.from_pretrained(folder)(SOURCE, return_tensors="pt").input_ids
        pad = reference.config.pad_token_id

        def lab() -> list[int]:
            return generate(loaded.model, loaded.task, SOURCE, max_new_tokens=new, capture=False).tokens

        def hf() -> list[int]:
            with torch.no_grad():
                out = reference.generate(ids, num_beams=1, do_sample=False, max_new_tokens=new,
                                         min_new_tokens=new, forced_eos_token_id=None, bad_words_ids=[[pad]])
            return [int(i) for i in out[0, 1:]]

        same = lab() == hf()  # also the warm-up of both
        lab_s, hf_s = [], []
        for _ in range(repeats):  # alternated, so a busy moment of the machine hits both
            lab_s.append(timed(lab))
            hf_s.append(timed(hf))
        n_params = sum(p.numel() for p in {id(p): p for p in loaded.model.parameters()}.values())
    print(f"marian (opus-mt shape, {n_params / 1e6:.1f} M parameters), {args.threads} thread(s), "
          f"{ids.size(1)} source tokens, {new} new tokens, median of {repeats} alternated rounds")
    ratios = {}
    for k, clock in enumerate(("wall", "CPU")):
        lab_tps = new / statistics.median(t[k] for t in lab_s)
        hf_tps = new / statistics.median(t[k] for t in hf_s)
        ratios[clock] = lab_tps / hf_tps
        print(f"  {clock:>4}: lab {lab_tps:6.1f} tokens/s, transformers {hf_tps:6.1f} tokens/s, "
              f"ratio {ratios[clock]:.2f}x")
    # With one thread, CPU time is the steadier clock on a shared machine (as bench/real_models.py).
    ratio = ratios["CPU" if args.threads == 1 else "wall"]
    print(f"  ratio {ratio:.2f}x (goal {SPEED_GOAL}x) {'ok' if ratio >= SPEED_GOAL else 'BELOW GOAL'}; "
          f"tokens {'identical' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
