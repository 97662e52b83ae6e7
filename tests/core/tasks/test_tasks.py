"""Tasks: right answers, bounded lengths, exact batch layouts, seeds, char-lm text."""

from __future__ import annotations

import random

import pytest
import torch

from tui_lab.core.config.lab_config import ConfigError, TaskConfig
from tui_lab.core.tasks import IGNORE, Batch, default_text, make_task
from tui_lab.core.tasks.vocab import BOS, DIGITS_VOCAB, EOS, PAD, SEP, TEXT_VOCAB, UNK

ARCHS = ("encoder-decoder", "decoder-only")
ALGORITHMIC = ("copy", "reverse", "sort", "addition")


def task_for(name: str, **kw):
    return make_task(TaskConfig(name=name, **kw))


@pytest.fixture(scope="module")
def lm():
    return task_for("char-lm")


# -- answers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, text, answer",
    [
        ("copy", "31415", "31415"),
        ("copy", "0", "0"),
        ("reverse", "31415", "51413"),
        ("reverse", "1200", "0021"),
        ("sort", "3142", "1234"),
        ("sort", "9090", "0099"),
        ("addition", "999+1", "1000"),
        ("addition", "123+45", "168"),
        ("addition", "0+0", "0"),
        ("addition", "58+67", "125"),
        ("addition", "999+999", "1998"),
    ],
)
def test_hand_picked_answers(name, text, answer):
    task = task_for(name)
    assert task.validate_input(text) is None
    assert task.solve(text) == answer


def test_task_attributes():
    for name in ALGORITHMIC:
        task = task_for(name)
        assert task.name == name and task.vocab == DIGITS_VOCAB and not task.is_lm
    lm = task_for("char-lm")
    assert lm.name == "char-lm" and lm.vocab == TEXT_VOCAB and lm.is_lm


@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_digit_lengths_respect_bounds(name):
    task = task_for(name, min_len=3, max_len=7)
    rng = random.Random(1)
    pairs = [task.example(rng) for _ in range(300)]
    pairs += [(s, task.solve(s)) for s in task.sample_inputs(rng, 2000)]
    lengths = {len(i) for i, _ in pairs}
    assert lengths == set(range(3, 8))  # every allowed length occurs, no other
    for text, answer in pairs:
        assert text.isdigit() and task.validate_input(text) is None
        assert sorted(answer) == sorted(text)  # a permutation of the input
        assert answer == task.solve(text)


def test_addition_operands_and_carries():
    task = task_for("addition", max_digits=3)
    rng = random.Random(2)
    inputs = task.sample_inputs(rng, 5000)
    operands = [op for s in inputs for op in s.split("+")]
    assert {len(op) for op in operands} == {1, 2, 3}  # each digit count is drawn
    assert all(0 <= int(op) <= 999 and (op == "0" or op[0] != "0") for op in operands)
    assert all(task.validate_input(s) is None for s in inputs)
    sums = [int(task.solve(s)) for s in inputs]
    assert sums == [int(a) + int(b) for a, b in (s.split("+") for s in inputs)]
    assert any(s >= 1000 for s in sums)  # carries out of the top digit happen


def test_addition_large_operands_are_exact():
    task = task_for("addition", max_digits=20)
    inputs = task.sample_inputs(random.Random(0), 200)
    assert all(len(op) <= 20 for s in inputs for op in s.split("+"))
    assert {len(op) for s in inputs for op in s.split("+")} >= {19, 20}


# -- input checks -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, text, fragment",
    [
        ("copy", "", "empty"),
        ("copy", "  ", "empty"),
        ("copy", "12a4", "outside the vocabulary"),
        ("copy", "1+2", "not allowed"),
        ("copy", "1" * 11, "too long"),
        ("sort", "12 3", "' '"),
        ("addition", "", "empty"),
        ("addition", "1234", "'+'"),
        ("addition", "1+2+3", "one '+'"),
        ("addition", "+5", "missing"),
        ("addition", "1234+5", "up to 3"),
        ("addition", "007+1", "leading zeros"),
        ("addition", "1-2", "outside the vocabulary"),
        ("char-lm", "", "empty"),
        ("char-lm", "café", "outside the vocabulary"),
        ("char-lm", "x" * 65, "too long"),
    ],
)
def test_validate_input_messages(name, text, fragment, lm):
    task = lm if name == "char-lm" else task_for(name)
    msg = task.validate_input(text)
    assert msg is not None and fragment in msg, msg
    assert "\n" not in msg


def test_validate_input_short_and_accepts():
    task = task_for("copy", min_len=3, max_len=5)
    assert "too short" in task.validate_input("12")
    assert task.validate_input("123") is None
    assert task.validate_input("12345") is None


def test_examples_for_display_are_valid(lm):
    for name in ALGORITHMIC:
        task = task_for(name)
        shown = task.examples_for_display(5, seed=0)
        assert len(shown) == 5 and len(set(shown)) == 5
        assert all(task.validate_input(s) is None for s in shown)
        assert shown == task.examples_for_display(5, seed=0)
    assert task_for("copy").examples_for_display(1)[0] == "31415"
    assert task_for("sort").examples_for_display(1)[0] == "3142"
    prompts = lm.examples_for_display(5)
    assert len(prompts) == 5 and all(lm.validate_input(p) is None for p in prompts)
    assert all(p in lm.text for p in prompts)


# -- batches ------------------------------------------------------------------------


def decode_batch(task, batch: Batch, arch: str) -> list[tuple[str, str]]:
    """Read (input, answer) back from a batch, checking the layout on the way."""
    v = task.vocab
    out = []
    for row in range(batch.size):
        tin, tout = batch.tgt_in[row].tolist(), batch.tgt_out[row].tolist()
        if arch == "encoder-decoder":
            src = batch.src[row].tolist()
            n_in = len(src) - src.count(PAD)
            assert all(t == PAD for t in src[n_in:]) and PAD not in src[:n_in]
            text = v.decode(src)
            n_ans = tout.index(EOS)
            answer = v.decode(tout[:n_ans])
            assert tin[0] == BOS and tin[1 : n_ans + 1] == tout[:n_ans]
            assert all(t == PAD for t in tin[n_ans + 1 :])
            assert all(t == IGNORE for t in tout[n_ans + 1 :])
        else:
            assert batch.src is None
            n_in = tin.index(SEP)
            text = v.decode(tin[:n_in])
            assert all(t == IGNORE for t in tout[:n_in])  # no loss on the input or SEP
            n_ans = tout.index(EOS) - n_in
            answer = v.decode(tout[n_in : n_in + n_ans])
            assert tin[n_in + 1 : n_in + 1 + n_ans] == tout[n_in : n_in + n_ans]
            assert all(t == PAD for t in tin[n_in + 1 + n_ans :])
            assert all(t == IGNORE for t in tout[n_in + n_ans + 1 :])
        out.append((text, answer))
    return out


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ALGORITHMIC)
def test_batch_layout_decodes_back(name, arch):
    task = task_for(name)
    batch = task.batch(random.Random(0), 64, arch)
    assert batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert batch.tgt_in.shape == batch.tgt_out.shape and batch.tgt_in.shape[0] == 64
    assert batch.tgt_in.is_contiguous() and batch.tgt_out.is_contiguous()
    pairs = decode_batch(task, batch, arch)
    assert all(task.solve(i) == a and task.validate_input(i) is None for i, a in pairs)
    assert batch.examples == pairs
    assert batch.n_tokens == int((batch.tgt_out != IGNORE).sum())
    assert batch.n_tokens == sum(len(a) + 1 for _, a in pairs)
    # Padding is to the longest row of this batch, not beyond.
    longest_in = max(len(i) for i, _ in pairs)
    longest_ans = max(len(a) for _, a in pairs)
    if arch == "encoder-decoder":
        assert batch.src.shape == (64, longest_in)
        assert batch.tgt_in.shape == (64, longest_ans + 1)
    else:
        assert batch.tgt_in.shape[1] == max(len(i) + len(a) + 1 for i, a in pairs)


@pytest.mark.parametrize("arch", ARCHS)
def test_collate_keeps_given_examples(arch):
    task = task_for("addition")
    pairs = [("999+1", "1000"), ("0+0", "0"), ("123+45", "168")]
    batch = task.collate(pairs, arch)
    assert decode_batch(task, batch, arch) == pairs
    if arch == "encoder-decoder":
        assert batch.src[1].tolist() == DIGITS_VOCAB.encode("0+0") + [PAD] * 3
        zero = DIGITS_VOCAB.encode("0")[0]
        # Width: the longest answer ("1000") + BOS or EOS.
        assert batch.tgt_in[1].tolist() == [BOS, zero, PAD, PAD, PAD]
        assert batch.tgt_out[1].tolist() == [zero, EOS, IGNORE, IGNORE, IGNORE]
    else:
        seq = DIGITS_VOCAB.encode("0+0") + [SEP] + DIGITS_VOCAB.encode("0") + [EOS]
        width = batch.tgt_in.shape[1]
        assert batch.tgt_in[1].tolist() == (seq[:-1] + [PAD] * width)[:width]
        assert batch.tgt_out[1].tolist() == ([IGNORE] * 3 + seq[4:] + [IGNORE] * width)[:width]
    unknown = task.collate([("1x", "1")], arch)
    assert UNK in (unknown.src if arch == "encoder-decoder" else unknown.tgt_in)[0].tolist()


def test_batches_are_reproducible_from_a_seed():
    for name in ALGORITHMIC:
        task = task_for(name)
        for arch in ARCHS:
            a = task.batch(random.Random(5), 32, arch)
            b = task.batch(random.Random(5), 32, arch)
            c = task.batch(random.Random(6), 32, arch)
            assert torch.equal(a.tgt_in, b.tgt_in) and torch.equal(a.tgt_out, b.tgt_out)
            assert not torch.equal(a.tgt_out, c.tgt_out) or a.tgt_out.shape != c.tgt_out.shape
    rng1, rng2 = random.Random(3), random.Random(3)
    task = task_for("copy")
    assert [task.example(rng1) for _ in range(5)] == [task.example(rng2) for _ in range(5)]


def test_batch_to_device_and_bad_arch():
    task = task_for("copy")
    batch = task.batch(random.Random(0), 4, "encoder-decoder")
    moved = batch.to("cpu")
    assert torch.equal(moved.src, batch.src) and moved.n_tokens == batch.n_tokens
    with pytest.raises(ValueError, match="arch"):
        task.batch(random.Random(0), 4, "decoder_only")
    with pytest.raises(ValueError):
        task.collate([], "decoder-only")


# -- held-out -----------------------------------------------------------------------


def test_held_out_is_distinct_seeded_and_not_the_training_stream():
    task = task_for("copy")
    held = task.held_out(500, seed=0)
    assert len(held) == 500 and len({i for i, _ in held}) == 500
    assert all(task.solve(i) == a for i, a in held)
    assert held == task.held_out(500, seed=0)
    assert held != task.held_out(500, seed=1)
    # Same seed as training (whose stream is random.Random(seed)): still other
    # examples. Short strings coincide by chance (there are only 10 of length 1),
    # long ones practically never.
    train = task.sample_inputs(random.Random(0), 500)
    assert [i for i, _ in held[:50]] != train[:50]
    long_held = {i for i, _ in held if len(i) >= 6}
    assert len(long_held) > 200 and not long_held & set(train)


def test_held_out_small_space_repeats_instead_of_looping():
    task = task_for("copy", min_len=1, max_len=1)  # only 10 possible inputs
    draws = []
    draw = task.example
    task.example = lambda rng: draws.append(1) or draw(rng)  # type: ignore[method-assign]
    held = task.held_out(50, seed=0)
    # It stops drawing once all 10 are in (a few dozen draws), far below its 10,000 cap.
    assert len(draws) < 500, len(draws)
    assert len(held) == 50 and {i for i, _ in held} == set("0123456789")
    add = task_for("addition", max_digits=1)  # 100 possible inputs
    assert len({i for i, _ in add.held_out(100, seed=0)}) == 100


# -- char-lm ------------------------------------------------------------------------


def test_default_text_is_python_help(lm):
    text = default_text()
    assert len(text) > 100_000
    assert "assert" in text and "lambda" in text
    assert not TEXT_VOCAB.unknown_chars(text)  # nothing maps to UNK
    assert "\r" not in text
    assert lm.text == text


def test_char_lm_split_sizes(lm):
    n = len(lm.text)
    assert len(lm.train_text) + len(lm.val_text) == n
    assert abs(len(lm.val_text) - 0.1 * n) <= 1
    assert lm.text.endswith(lm.val_text)  # validation = the last fraction
    assert len(lm.train_data) == len(lm.train_text) and len(lm.val_data) == len(lm.val_text)
    assert TEXT_VOCAB.decode(lm.val_data[:200]) == lm.val_text[:200]
    other = task_for("char-lm", val_fraction=0.25)
    assert abs(len(other.val_text) - 0.25 * n) <= 1


def test_char_lm_batches_are_shifted_windows_of_the_training_split(lm):
    batch = lm.batch(random.Random(0), 16)
    assert batch.src is None
    assert batch.tgt_in.shape == batch.tgt_out.shape == (16, 64)
    assert batch.tgt_in.dtype == torch.long and batch.tgt_out.is_contiguous()
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert batch.n_tokens == 16 * 64
    for row in range(16):
        window = TEXT_VOCAB.decode(batch.tgt_in[row]) + TEXT_VOCAB.decode(batch.tgt_out[row, -1:])
        assert len(window) == 65 and window in lm.train_text
    again = lm.batch(random.Random(0), 16, arch="decoder-only")
    assert torch.equal(batch.tgt_in, again.tgt_in)
    with pytest.raises(ValueError, match="decoder-only"):
        lm.batch(random.Random(0), 16, arch="encoder-decoder")


def test_char_lm_val_batches_are_deterministic(lm):
    a = lm.val_batches(32, max_batches=3)
    b = lm.val_batches(32, max_batches=3)
    assert len(a) == 3 and all(x.tgt_in.shape == (32, 64) for x in a)
    assert all(torch.equal(x.tgt_out, y.tgt_out) for x, y in zip(a, b, strict=True))
    for batch in a:
        for row in range(0, 32, 8):
            assert TEXT_VOCAB.decode(batch.tgt_out[row]) in lm.val_text
    every = lm.val_batches(256, max_batches=10_000)  # all non-overlapping windows
    assert sum(x.size for x in every) == (len(lm.val_text) - 65) // 64 + 1


def test_char_lm_held_out_and_collate(lm):
    held = lm.held_out(20, seed=0)
    assert held == lm.held_out(20, seed=0)
    assert all(p + c in lm.val_text and len(c) == 8 for p, c in held)
    batch = lm.collate([("Hello", " wor"), ("ab", "c")])
    assert batch.n_tokens == 4 + 1
    assert batch.tgt_out[0].tolist()[:4] == [IGNORE] * 4
    assert TEXT_VOCAB.decode(batch.tgt_out[0, 4:]) == " wor"
    assert TEXT_VOCAB.decode(batch.tgt_in[0]) == "Hello wo"
    assert batch.tgt_out[1].tolist() == [IGNORE, TEXT_VOCAB.encode("c")[0]] + [IGNORE] * 6
    assert lm.solve('The "assert" statement') != ""


def test_char_lm_user_text(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(("café “quoted” line\r\n" * 200).encode("utf-8"))
    task = task_for("char-lm", text=str(path), block_size=16)
    assert task.text.startswith('cafe "quoted" line\n')
    assert not TEXT_VOCAB.unknown_chars(task.text)
    assert task.batch(random.Random(0), 4).tgt_in.shape == (4, 16)


@pytest.mark.parametrize(
    "content, fragment",
    [(None, "no such file"), (b"short text", "needs at least"), (b"ab\x00cd" * 100, "not a text")],
)
def test_char_lm_bad_text_is_one_line_config_error(tmp_path, content, fragment):
    path = tmp_path / "t.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        task_for("char-lm", text=str(path))
    msg = str(err.value)
    assert fragment in msg and "task.text" in msg and "\n" not in msg
    assert err.value.field == "task.text" and msg == f"task.text: {err.value.reason}"
    with pytest.raises(ConfigError, match="folder"):
        task_for("char-lm", text=str(tmp_path))


def test_the_package_keeps_the_names_other_code_imports():
    import tui_lab.core.tasks as tasks

    for name in ("make_task", "Task", "Batch", "IGNORE", "default_text"):
        assert name in tasks.__all__ and getattr(tasks, name) is not None
    assert isinstance(make_task(TaskConfig(name="sort")), tasks.Task)
