"""A real model's folder for the lab's pilot tests: one random-weight GPT-2, saved once per module.

``save_family`` writes it with ``transformers``' ``save_pretrained`` (and a small byte-level
BPE), exactly as a downloaded checkpoint is laid out; the reference model it returns is
what the panes' numbers are checked against.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.hf_factory import save_family


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """(a saved GPT-2 folder at the small test shape: 2 layers x 4 heads, context 64; its reference)."""
    folder = tmp_path_factory.mktemp("real-model") / "tiny-gpt2"
    reference = save_family(folder, "gpt2")
    return folder, reference
