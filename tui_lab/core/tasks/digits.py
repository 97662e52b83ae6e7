"""The algorithmic digit tasks: copy, reverse and sort a digit string; add two numbers."""

from __future__ import annotations

import itertools
import random

from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.tasks.base import TaskBase, outside, quoted
from tui_lab.core.tasks.vocab import DIGITS_VOCAB

DIGITS = "0123456789"


class DigitTask(TaskBase):
    """copy, reverse and sort over digit strings of length ``min_len..max_len``."""

    vocab = DIGITS_VOCAB

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self._lengths = range(config.min_len, config.max_len + 1)

    def sample_input(self, rng: random.Random) -> str:
        return "".join(rng.choices(DIGITS, k=rng.choice(self._lengths)))

    def sample_inputs(self, rng: random.Random, n: int) -> list[str]:
        # Lengths uniform over min_len..max_len, then every digit in one draw
        # cut into pieces: two calls into random instead of two per example.
        lengths = rng.choices(self._lengths, k=n)
        digits = "".join(rng.choices(DIGITS, k=sum(lengths)))
        ends = itertools.accumulate(lengths)
        return [digits[end - length : end] for end, length in zip(ends, lengths, strict=True)]

    def solve(self, input_text: str) -> str:
        if self.name == "copy":
            return input_text
        if self.name == "reverse":
            return input_text[::-1]
        return "".join(sorted(input_text))

    def validate_input(self, text: str) -> str | None:
        lo, hi = self.config.min_len, self.config.max_len
        if not text.strip():
            return f"empty input: type {lo} to {hi} digits, e.g. 31415"
        bad = [c for c in dict.fromkeys(text) if c not in DIGITS]
        if bad:
            return f"{quoted(bad)} {outside(bad, self.vocab)}: type only the digits 0-9"
        if len(text) > hi:
            return f"too long: {len(text)} digits; this task uses {lo} to {hi}"
        if len(text) < lo:
            return f"too short: {len(text)} digits; this task uses {lo} to {hi}"
        return None

    def _classic_inputs(self) -> list[str]:
        return {"copy": ["31415"], "reverse": ["12345"], "sort": ["3142"]}[self.name] + [
            "2718281828"
        ]

    def input_space_size(self) -> int:
        lo, hi = self.config.min_len, self.config.max_len
        return sum(10**length for length in range(lo, hi + 1))


class AdditionTask(TaskBase):
    """``a+b`` -> ``a + b`` for operands of 1..max_digits digits (no leading zeros)."""

    vocab = DIGITS_VOCAB

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        # (lowest value, how many values) for each digit count 1..max_digits:
        # 1 digit is 0..9, d > 1 digits is 10**(d-1)..10**d - 1.
        lows = [0] + [10 ** (d - 1) for d in range(2, config.max_digits + 1)]
        self._operand_ranges = [(low, 10**d - low) for d, low in enumerate(lows, start=1)]
        # random() carries 53 bits: beyond that, draw exact integers (slower).
        self._exact = 10**config.max_digits > 2**52

    def sample_input(self, rng: random.Random) -> str:
        return self.sample_inputs(rng, 1)[0]

    def sample_inputs(self, rng: random.Random, n: int) -> list[str]:
        # A random digit count first, then a value with that many digits:
        # uniform values would make nearly every operand max_digits long.
        picks = rng.choices(self._operand_ranges, k=2 * n)
        if self._exact:
            ops = [low + rng.randrange(span) for low, span in picks]
        else:
            rand = rng.random
            ops = [low + int(rand() * span) for low, span in picks]
        return [f"{a}+{b}" for a, b in zip(ops[0::2], ops[1::2], strict=True)]

    def solve(self, input_text: str) -> str:
        """The sum; ``input_text`` must pass ``validate_input``."""
        a, _, b = input_text.partition("+")
        return str(int(a or 0) + int(b or 0))

    def validate_input(self, text: str) -> str | None:
        d = self.config.max_digits
        example = "123+45" if d >= 3 else "1+2"
        if not text.strip():
            return f"empty input: type two numbers joined by '+', e.g. {example}"
        bad = [c for c in dict.fromkeys(text) if c not in "0123456789+"]
        if bad:
            return f"{quoted(bad)} {outside(bad, self.vocab)}: type digits and one '+'"
        if text.count("+") != 1:
            return f"write exactly one '+' between two numbers, e.g. {example}"
        for operand in text.split("+"):
            if not operand:
                return f"a number is missing on one side of '+', e.g. {example}"
            if len(operand) > d:
                return f"{operand} has {len(operand)} digits; this task adds numbers of up to {d}"
            if len(operand) > 1 and operand[0] == "0":
                return f"write {operand} without leading zeros ({int(operand)})"
        return None

    def _classic_inputs(self) -> list[str]:
        return ["123+45", "999+1", "0+0", "58+67"]

    def input_space_size(self) -> int:
        return (10**self.config.max_digits) ** 2
