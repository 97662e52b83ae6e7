"""Random-weight Hugging Face models at the four families' real layouts, for the tests.

``transformers`` is the reference: it builds each model, ``save_pretrained``
writes the folder exactly as a downloaded checkpoint is laid out, and the
tests load that folder into the lab and compare. Nothing here is downloaded:
the tokenizer is a small byte-level BPE trained on a text in this file.

In ``bench/`` rather than among the tests' fixtures because the benchmarks and the
screenshot scripts build these folders too, and they import no test code; the tests
import it from here. ``transformers`` is a test-only dependency (``.[test]``), so
callers outside the tests import this module where they need it, not at the top.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

# Small shapes that still exercise each family's quirks (several heads, several
# layers, a head size that rotary fractions divide, grouped key/value heads).
SMALL: dict[str, dict[str, Any]] = {
    "gpt2": dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=300),
    "gpt_neox": dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, vocab_size=300, rotary_pct=0.25, use_parallel_residual=True,
    ),
    "llama": dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=64, vocab_size=300, rope_theta=10000.0,
        tie_word_embeddings=False,
    ),
    "gpt_neo": dict(
        hidden_size=32, num_layers=2, num_heads=4, max_position_embeddings=64, vocab_size=300,
        attention_types=[[["global", "local"], 1]], window_size=8,
    ),
}
# The families opened since, each at a shape that exercises its differences from Llama:
# odd head counts, grouped key/value heads, head_dim apart from hidden / heads, sliding
# windows shorter than the tests' prompts (12 tokens), soft-caps that bite.
_LLAMA_LIKE = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    intermediate_size=64, max_position_embeddings=64, vocab_size=300,
)
SMALL.update({
    "qwen2": {**_LLAMA_LIKE, "hidden_size": 24, "num_attention_heads": 3, "num_key_value_heads": 1,
              "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
    "qwen3": {**_LLAMA_LIKE, "head_dim": 16, "tie_word_embeddings": True},
    "gemma": {**_LLAMA_LIKE, "num_key_value_heads": 1, "head_dim": 16},
    "gemma2": {**_LLAMA_LIKE, "head_dim": 16, "query_pre_attn_scalar": 20, "sliding_window": 4,
               "attn_logit_softcapping": 0.05, "final_logit_softcapping": 0.5},
    "gemma3_text": {**_LLAMA_LIKE, "num_hidden_layers": 3, "head_dim": 8, "sliding_window": 4,
                    "sliding_window_pattern": 2, "query_pre_attn_scalar": 8, "final_logit_softcapping": 0.5},
    "mistral": {**_LLAMA_LIKE, "sliding_window": 4},
    "phi3": {**_LLAMA_LIKE, "partial_rotary_factor": 0.5, "sliding_window": 5, "pad_token_id": 0},
    "olmo2": {**_LLAMA_LIKE, "pad_token_id": 0},
    "llama3": {**_LLAMA_LIKE, "rope_parameters": {
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
})

TEXT = (
    "The cat sat on the mat. The dog sat on the log. Once upon a time there was a little "
    "girl who liked to read stories about cats and dogs and the sea. "
) * 20


def hf_config(family: str, **overrides: Any) -> Any:
    """The ``transformers`` config of ``family`` at the small shape, with ``overrides``."""
    import transformers

    classes = {
        "gpt2": transformers.GPT2Config,
        "gpt_neox": transformers.GPTNeoXConfig,
        "llama": transformers.LlamaConfig,
        "gpt_neo": transformers.GPTNeoConfig,
        "qwen2": transformers.Qwen2Config,
        "qwen3": transformers.Qwen3Config,
        "gemma": transformers.GemmaConfig,
        "gemma2": transformers.Gemma2Config,
        "gemma3_text": transformers.Gemma3TextConfig,
        "mistral": transformers.MistralConfig,
        "phi3": transformers.Phi3Config,
        "olmo2": transformers.Olmo2Config,
        "llama3": transformers.LlamaConfig,  # Llama with rope_scaling llama3
    }
    # Token 0 is the BPE's only special token (<|endoftext|>): BOS and EOS, as in GPT-2.
    kwargs = {"bos_token_id": 0, "eos_token_id": 0, **SMALL[family], **overrides}
    # Eager attention, so output_attentions returns the weights the lab is compared with.
    return classes[family](attn_implementation="eager", **kwargs)


def hf_model(family: str, seed: int = 0, **overrides: Any) -> Any:
    """A random-weight causal LM of ``family`` in eval mode (fp32)."""
    import transformers

    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(family, **overrides))
    # Random init leaves LayerNorms at 1/0 and some biases at 0: perturb every
    # parameter so a weight loaded into the wrong slot changes the logits.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model.eval()


def train_bpe(vocab_size: int = 300) -> Any:
    """A byte-level BPE (GPT-2's kind) trained on ``TEXT``: a ``tokenizers.Tokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([TEXT], trainer)
    return tok


def save_tokenizer(folder: Path, vocab_size: int = 300) -> None:
    """``tokenizer.json`` (and the config files ``AutoTokenizer`` reads) into ``folder``."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=train_bpe(vocab_size),
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.save_pretrained(folder)


def save_family(
    folder: Path, family: str, seed: int = 0, tokenizer: bool = True, **overrides: Any
) -> Any:
    """Write a random ``family`` model (and a tokenizer) to ``folder`` with
    ``save_pretrained``; returns the reference model, in eval mode."""
    model = hf_model(family, seed, **overrides)
    model.save_pretrained(folder)  # safetensors by default
    if tokenizer:
        save_tokenizer(folder, model.config.vocab_size)
    return model


def read_config(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "config.json").read_text())


# --- Marian (opus-mt): an encoder-decoder translator --------------------------------

# A small Marian: 2 + 2 layers, 4 heads, swish, scaled embeddings, post-LN, shared
# embeddings as opus-mt has them; pad (the last id) is also the decoder's start.
MARIAN_VOCAB = 64
MARIAN_SMALL: dict[str, Any] = dict(
    d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
    activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True,
)

# Two "languages" for the SentencePiece models: English and a German-like text.
SOURCE_TEXT = TEXT
TARGET_TEXT = (
    "Die Katze sass auf der Matte. Der Hund sass auf dem Holz. Es war einmal ein kleines "
    "Maedchen, das gern Geschichten ueber Katzen und Hunde und das Meer las. "
) * 20


def train_spm(folder: Path, name: str, text: str, vocab_size: int = 40) -> Path:
    """A small unigram SentencePiece model trained on ``text``: ``folder/name``.

    Ids 0/1 are ``</s>``/``<unk>`` as in opus-mt's models; no BOS, no pad (vocab.json gives pad).
    """
    import io

    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text.replace(". ", ".\n").splitlines()), model_writer=out, vocab_size=vocab_size,
        eos_id=0, unk_id=1, bos_id=-1, pad_id=-1, character_coverage=1.0, model_type="unigram",
        hard_vocab_limit=False, minloglevel=2, num_threads=1,
    )
    path = folder / name
    path.write_bytes(out.getvalue())
    return path


def save_marian_tokenizer(folder: Path, vocab_size: int = MARIAN_VOCAB) -> dict[str, int]:
    """``source.spm``, ``target.spm``, ``vocab.json`` and ``tokenizer_config.json`` as
    ``MarianTokenizer.save_pretrained`` writes them; returns vocab.json (piece -> id).

    vocab.json is the two models' pieces together (opus-mt's shared vocabulary):
    ``</s>`` 0, ``<unk>`` 1, then every other piece, ``<pad>`` last (``vocab_size - 1``).
    """
    import sentencepiece as spm
    from transformers import MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / "spm-training"
    scratch.mkdir(exist_ok=True)
    source = train_spm(scratch, "source.spm", SOURCE_TEXT)
    target = train_spm(scratch, "target.spm", TARGET_TEXT)
    vocab: dict[str, int] = {"</s>": 0, "<unk>": 1}
    for model in (source, target):
        proc = spm.SentencePieceProcessor(model_file=str(model))
        for i in range(proc.get_piece_size()):
            vocab.setdefault(proc.id_to_piece(i), len(vocab))
    if len(vocab) >= vocab_size:
        raise ValueError(f"{len(vocab)} pieces do not fit a vocabulary of {vocab_size}")
    vocab["<pad>"] = vocab_size - 1  # the ids between are unused rows, as opus-mt has some
    (scratch / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    tok = MarianTokenizer(str(source), str(target), str(scratch / "vocab.json"))
    tok.save_pretrained(folder)
    for path in scratch.iterdir():
        path.unlink()
    scratch.rmdir()
    return vocab


def marian_config(**overrides: Any) -> Any:
    """The small ``MarianConfig`` (eager attention unless overridden), with ``overrides``."""
    import transformers

    pad = overrides.get("vocab_size", MARIAN_VOCAB) - 1
    kwargs = {
        **MARIAN_SMALL, "vocab_size": MARIAN_VOCAB, "pad_token_id": pad, "attn_implementation": "eager",
        "decoder_start_token_id": pad, "eos_token_id": 0, "forced_eos_token_id": 0, **overrides,
    }
    return transformers.MarianConfig(**kwargs)


def marian_model(seed: int = 0, **overrides: Any) -> Any:
    """A random-weight ``MarianMTModel`` in eval mode, every weight (and the logits bias) perturbed."""
    import transformers

    torch.manual_seed(seed)
    model = transformers.MarianMTModel(marian_config(**overrides))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" not in name:  # the fixed sinusoids stay the formula
                p.add_(torch.randn_like(p) * 0.02)
        model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.1)
    return model.eval()


def save_marian(folder: Path, seed: int = 0, tokenizer: bool = True, **overrides: Any) -> Any:
    """Write a random Marian translator (and its tokenizer) with ``save_pretrained``;
    returns the reference ``MarianMTModel``, in eval mode."""
    model = marian_model(seed, **overrides)
    model.save_pretrained(folder)
    if tokenizer:
        save_marian_tokenizer(folder, model.config.vocab_size)
    return model


# --- encoder-only masked LMs (BERT, DistilBERT, RoBERTa) ---------------------------

# Small shapes with each family's layout: several heads and layers, token types (BERT's
# two, RoBERTa's one), RoBERTa's positions past its padding index (pad 1, table + 2).
MLM_VOCAB = 120
ROBERTA_VOCAB = 300  # a byte-level BPE starts from 256 bytes
MLM_SMALL: dict[str, dict[str, Any]] = {
    "bert": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=40, vocab_size=MLM_VOCAB, type_vocab_size=2, pad_token_id=0),
    "distilbert": dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=40,
                       vocab_size=MLM_VOCAB, pad_token_id=0),
    "roberta": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    max_position_embeddings=42, vocab_size=ROBERTA_VOCAB, type_vocab_size=1, pad_token_id=1,
                    bos_token_id=0, eos_token_id=2),
}
WORDPIECE_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def mlm_config(family: str, **overrides: Any) -> Any:
    """The ``transformers`` config of an encoder-only ``family`` at its small shape (eager attention)."""
    import transformers

    classes = {"bert": transformers.BertConfig, "distilbert": transformers.DistilBertConfig,
               "roberta": transformers.RobertaConfig}
    return classes[family](attn_implementation="eager", **{**MLM_SMALL[family], **overrides})


def hf_masked_lm(family: str, seed: int = 0, bare: bool = False, **overrides: Any) -> Any:
    """A random-weight ``*ForMaskedLM`` of ``family`` (``bare``: the encoder alone, no head),
    every parameter perturbed, in eval mode."""
    import transformers

    torch.manual_seed(seed)
    config = mlm_config(family, **overrides)
    auto = transformers.AutoModel if bare else transformers.AutoModelForMaskedLM
    model = auto.from_config(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model.eval()


def train_wordpiece(vocab_size: int = MLM_VOCAB) -> Any:
    """A lower-casing WordPiece (BERT's kind) trained on ``TEXT``: a ``tokenizers.Tokenizer``."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=WORDPIECE_SPECIALS)
    tok.train_from_iterator([TEXT], trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def train_roberta_bpe(vocab_size: int = ROBERTA_VOCAB) -> Any:
    """A byte-level BPE with RoBERTa's specials (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` 4)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=ROBERTA_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([TEXT], trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True)
    return tok


def save_mlm_tokenizer(folder: Path, family: str, vocab_size: int = MLM_VOCAB) -> Any:
    """The family's tokenizer as its fast ``transformers`` class saves it (tokenizer.json,
    vocab.txt or vocab.json + merges.txt, tokenizer_config.json); returns that tokenizer."""
    import transformers

    if family == "roberta":
        fast = transformers.RobertaTokenizerFast(tokenizer_object=train_roberta_bpe(vocab_size))
    else:
        cls = transformers.BertTokenizerFast if family == "bert" else transformers.DistilBertTokenizerFast
        fast = cls(tokenizer_object=train_wordpiece(vocab_size))
    fast.save_pretrained(folder)
    return fast


def save_masked_lm(folder: Path, family: str, seed: int = 0, bare: bool = False, **overrides: Any) -> Any:
    """Write a random encoder-only ``family`` model and its tokenizer with ``save_pretrained``;
    returns the reference model, in eval mode."""
    model = hf_masked_lm(family, seed, bare=bare, **overrides)
    model.save_pretrained(folder)
    save_mlm_tokenizer(folder, family, model.config.vocab_size)
    return model


def write_slow_vocab(folder: Path, family: str) -> None:
    """Replace ``tokenizer.json`` by the files a slow tokenizer reads: ``vocab.txt`` (WordPiece,
    one piece a line in id order) or ``vocab.json`` + ``merges.txt`` (RoBERTa's BPE)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    if family == "roberta":
        tok.model.save(str(folder))  # vocab.json and merges.txt
    else:
        vocab = tok.get_vocab(with_added_tokens=True)
        (folder / "vocab.txt").write_text("".join(p + "\n" for p, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
    (folder / "tokenizer.json").unlink()
