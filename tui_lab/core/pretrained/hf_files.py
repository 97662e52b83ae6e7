"""The file names of a Hugging Face model folder, named once.

What ``config.json``, the weights, and each tokenizer's files are called, for
every module that reads or writes such a folder (``source``, ``files``,
``tokenizer``, ``marian_tokenizer``, ``translator``, the families, the
exports) and for a run fine-tuned from one (``decoding/run_source.py``).
"""

from __future__ import annotations

CONFIG_FILE = "config.json"
GENERATION_CONFIG = "generation_config.json"
# The weights: one safetensors file or its shards' index; else PyTorch's pickle (read
# only through torch.load(weights_only=True)).
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_FILE = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"
# A tokenizer: tokenizer.json, else a byte-level BPE's vocab.json + merges.txt; its settings.
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
# A Marian translator's sentencepiece models (and its target vocabulary, when separate).
SOURCE_SPM = "source.spm"
TARGET_SPM = "target.spm"
TARGET_VOCAB_FILE = "target_vocab.json"

#: What a run fine-tuned from a real model keeps of it, to rebuild its tokenizer.
TOKENIZER_FILES = (
    TOKENIZER_FILE,
    VOCAB_FILE,
    MERGES_FILE,
    TOKENIZER_CONFIG,
    SPECIAL_TOKENS_MAP,
    GENERATION_CONFIG,
    CONFIG_FILE,
)
