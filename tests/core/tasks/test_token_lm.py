"""token-lm: a text through a real model's tokenizer, as training batches and validation windows."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.hf_factory import save_tokenizer
from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.pretrained.tokenizer import load_tokenizer
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.token_lm import TokenLMTask

# No window of this text repeats (the numbers only grow), so a window's place in the
# text is found by its content alone.
TEXT = " ".join(str(i) for i in range(1500)) + "\n"
BLOCK = 16
CONTEXT = 64


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("tok")
    save_tokenizer(folder)
    return load_tokenizer(folder)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "numbers.txt"
    path.write_text(TEXT)
    return path


@pytest.fixture(scope="module")
def task(tokenizer, text_file) -> TokenLMTask:
    config = TaskConfig(name="token-lm", text=str(text_file), block_size=BLOCK, val_fraction=0.2)
    return make_task(config, tokenizer, CONTEXT)


def start_of(ids: list[int], window: list[int]) -> int:
    """Where ``window`` occurs in ``ids`` (exactly once in this text)."""
    found = [s for s in range(len(ids) - len(window) + 1) if ids[s : s + len(window)] == window]
    assert len(found) == 1, found
    return found[0]


def test_the_text_is_its_tokenizers_ids_split_at_the_validation_fraction(task, tokenizer) -> None:
    ids = tokenizer.encode(TEXT)
    assert task.data.tolist() == ids
    assert task.split == int(len(ids) * 0.8)


def test_training_targets_are_the_inputs_shifted_by_one_within_the_training_split(task, tokenizer) -> None:
    ids = tokenizer.encode(TEXT)
    batch = task.batch(random.Random(0), 12)
    assert batch.src is None and batch.tgt_in.shape == (12, BLOCK) == batch.tgt_out.shape
    assert batch.n_tokens == 12 * BLOCK
    for row_in, row_out in zip(batch.tgt_in.tolist(), batch.tgt_out.tolist(), strict=True):
        s = start_of(ids, row_in)
        assert row_out == ids[s + 1 : s + BLOCK + 1]
        assert s + BLOCK < task.split  # the last target is still a training token


def test_validation_windows_lie_in_the_validation_split_and_are_fixed(task, tokenizer) -> None:
    ids = tokenizer.encode(TEXT)
    batches = task.val_batches(4, 3)
    assert batches and all(b.tgt_in.shape[1] == BLOCK for b in batches)
    for b in batches:
        for row_in, row_out in zip(b.tgt_in.tolist(), b.tgt_out.tolist(), strict=True):
            s = start_of(ids, row_in)
            assert s >= task.split
            assert row_out == ids[s + 1 : s + BLOCK + 1]
    again = task.val_batches(4, 3)
    assert [b.tgt_in.tolist() for b in again] == [b.tgt_in.tolist() for b in batches]


def test_batches_are_reproducible_from_the_seed(task) -> None:
    a = task.batch(random.Random(5), 4).tgt_in
    b = task.batch(random.Random(5), 4).tgt_in
    assert a.tolist() == b.tolist()


def test_a_block_longer_than_the_models_context_is_refused(tokenizer, text_file) -> None:
    config = TaskConfig(name="token-lm", text=str(text_file), block_size=CONTEXT + 1)
    with pytest.raises(ConfigError, match="context of 64 tokens"):
        TokenLMTask(config, tokenizer, CONTEXT)


def test_a_text_too_short_for_a_window_in_each_split_says_how_long_it_must_be(tokenizer, tmp_path) -> None:
    short = tmp_path / "short.txt"
    short.write_text("The cat sat on the mat.")
    task = TokenLMTask(TaskConfig(name="token-lm", text=str(short), block_size=BLOCK), tokenizer, CONTEXT)
    with pytest.raises(ConfigError) as info:
        task.batch(random.Random(0), 2)
    message = str(info.value)
    assert "short.txt" in message and "tokens" in message and "needs at least 170" in message
    assert "\n" not in message


def test_the_text_is_read_only_when_batches_are_asked_for(tokenizer, tmp_path) -> None:
    # A run folder decodes where its text is not: making the task reads nothing.
    missing = tmp_path / "gone.txt"
    task = TokenLMTask(TaskConfig(name="token-lm", text=str(missing), block_size=BLOCK), tokenizer, CONTEXT)
    assert task.validate_input("The cat") is None
    assert task.examples_for_display(3)  # the stock prompts stand in
    with pytest.raises(ConfigError, match="no such file"):
        task.val_batches(2, 1)


def test_the_text_is_not_cleaned_into_the_character_vocabulary(tokenizer, tmp_path) -> None:
    path = tmp_path / "quotes.txt"
    path.write_text("“Café” — naïve\r\n" * 200)
    task = TokenLMTask(TaskConfig(name="token-lm", text=str(path), block_size=BLOCK), tokenizer, CONTEXT)
    assert task.data.tolist() == tokenizer.encode("“Café” — naïve\n" * 200)


def test_make_task_needs_the_tokenizer_for_token_lm() -> None:
    with pytest.raises(ConfigError, match="--model SOURCE"):
        make_task(TaskConfig(name="token-lm"))
