"""modular-addition: the examples against the arithmetic, the split, the batch layout, typed input."""

from __future__ import annotations

import random

import pytest

from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.lab_config import TaskConfig, from_dict
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.base import IGNORE
from tui_lab.core.tasks.vocab import N_SPECIALS, SEP


def task(**values):
    return make_task(TaskConfig(name="modular-addition", **values))


def numbers(text):
    return [int(x) for x in text.split()]


def test_every_pair_once_split_by_the_fraction_and_answers_are_sums_mod_p():
    t = task(p=13, train_fraction=0.3)
    train = t.training_set()
    held = t.held_out(10_000, seed=0)
    assert len(train) == round(0.3 * 169) and len(train) + len(held) == 169
    pairs = [tuple(numbers(i)) for i, _ in train + held]
    assert sorted(pairs) == [(a, b) for a in range(13) for b in range(13)]  # each pair once
    assert not {i for i, _ in train} & {i for i, _ in held}  # nothing held out is trained on
    for text, answer in train + held:
        a, b = numbers(text)
        assert int(answer) == (a + b) % 13
    assert t.solve("12 5") == "4" and t.solve("7+6") == "0"


def test_the_split_is_fixed_by_the_settings_not_by_the_training_seed():
    assert task(p=11).held_out(500, seed=1) == task(p=11).held_out(500, seed=2)
    assert task(p=11, train_fraction=0.5).training_set() != task(p=11, train_fraction=0.6).training_set()


@pytest.mark.parametrize(("operation", "a", "b", "answer"), [
    ("subtract", 2, 5, 4),  # 2 - 5 = -3 = 4 mod 7
    ("multiply", 4, 5, 6),  # 20 = 6 mod 7
    ("divide", 3, 2, 5),    # 2^-1 = 4 mod 7 (2 * 4 = 8 = 1), 3 * 4 = 12 = 5 mod 7
])
def test_the_other_operations(operation, a, b, answer):
    assert task(p=7, operation=operation).solve(f"{a} {b}") == str(answer)


def test_divide_leaves_out_division_by_zero_and_needs_a_prime():
    t = task(p=7, operation="divide")
    assert all(numbers(i)[1] != 0 for i, _ in t.training_set() + t.held_out(100, 0))
    assert t.input_space_size() == 7 * 6
    with pytest.raises(ConfigError, match="prime"):
        TaskConfig(name="modular-addition", p=9, operation="divide")


def test_training_batches_are_drawn_from_the_training_pairs_only():
    t = task(p=11, train_fraction=0.4)
    train = {i for i, _ in t.training_set()}
    drawn = t.sample_inputs(random.Random(0), 500)
    assert set(drawn) <= train


def test_a_batch_is_a_b_equals_with_the_loss_on_the_answer_at_equals():
    t = task(p=59)
    batch = t.collate([("12 34", "46"), ("58 1", "0")], "decoder-only")
    ids = [[12 + N_SPECIALS, 34 + N_SPECIALS, SEP], [58 + N_SPECIALS, 1 + N_SPECIALS, SEP]]
    assert batch.tgt_in.tolist() == ids
    assert batch.tgt_out.tolist() == [[IGNORE, IGNORE, 46 + N_SPECIALS], [IGNORE, IGNORE, N_SPECIALS]]
    assert batch.n_tokens == 2 and batch.src is None
    assert len(t.vocab) == N_SPECIALS + 59


def test_vocab_reads_and_writes_numbers_and_labels_them():
    v = task(p=59).vocab
    assert v.encode("12 + 34 =") == [12 + N_SPECIALS, 34 + N_SPECIALS]
    assert v.decode([46 + N_SPECIALS]) == "46"
    assert v.label(SEP) == "=" and v.label(7 + N_SPECIALS) == "7"


@pytest.mark.parametrize(("text", "fragment"), [
    ("12", "1 number(s)"),
    ("1 2 3", "3 number(s)"),
    ("60 1", "60 is not a residue mod 59"),
    ("a 1", "'a' not allowed"),
])
def test_typed_input_is_checked_in_one_line(text, fragment):
    problem = task(p=59).validate_input(text)
    assert problem is not None and fragment in problem
    assert task(p=59).validate_input("12 + 34 =") is None


def test_config_refuses_an_encoder_decoder_and_full_batch_on_an_endless_task():
    with pytest.raises(ConfigError, match="decoder-only"):
        from_dict({"task": {"name": "modular-addition"}})
    with pytest.raises(ConfigError, match="finite training set"):
        from_dict({"train": {"full_batch": True}})  # copy: inputs are drawn without end
    cfg = from_dict({"model": {"arch": "decoder-only", "max_len": 4},
                     "task": {"name": "modular-addition"}, "train": {"full_batch": True}})
    assert cfg.sequence_length_needed() == 4
