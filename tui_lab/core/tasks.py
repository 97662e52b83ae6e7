"""What the model learns: algorithmic digit tasks and character-level language modelling.

``make_task(config.task)`` returns a ``Task`` that makes examples, the
reference answer for any input, input checks for the UI, and training
batches for either architecture:

- encoder-decoder: ``src`` = input ids (PAD-padded), ``tgt_in`` = BOS + answer
  (PAD-padded), ``tgt_out`` = answer + EOS (padded with ``IGNORE``);
- decoder-only: the sequence ``input SEP answer EOS``; ``tgt_in`` = sequence[:-1],
  ``tgt_out`` = sequence[1:] with every position that does not predict the
  answer or EOS set to ``IGNORE`` (so the loss teaches answering, not
  guessing the random input).

``IGNORE`` is -100, the default ``ignore_index`` of ``F.cross_entropy``.
Batches are built on the CPU; the training loop moves them with ``Batch.to``.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import sys
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from .config import ARCHS, ConfigError, TaskConfig
from .vocab import BOS, DIGITS_VOCAB, EOS, PAD, SEP, TEXT_VOCAB, Vocab

IGNORE = -100
DIGITS = "0123456789"
# A user text file larger than this is refused (the whole text is held in memory).
MAX_TEXT_BYTES = 64 * 2**20
# char-lm held-out pairs: the model continues a prompt by this many characters.
LM_CONTINUATION = 8

_PAD_CHAR = chr(PAD)
_BOS_CHAR = chr(BOS)
_EOS_CHAR = chr(EOS)
_SEP_CHAR = chr(SEP)
_UTF32_NATIVE = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"


@dataclass
class Batch:
    """One training or evaluation batch (CPU tensors until ``to`` moves them).

    ``n_tokens`` counts the target positions that are not ``IGNORE``: the
    loss is averaged over exactly these, and tokens/s is reported from them.
    """

    src: torch.Tensor | None  # (B, S) long, PAD-padded; None for decoder-only
    tgt_in: torch.Tensor  # (B, T) long, PAD-padded
    tgt_out: torch.Tensor  # (B, T) long, IGNORE where no loss is taken
    n_tokens: int
    # The (input, answer) pairs the rows were built from (None for char-lm
    # windows): lets the trainer note which inputs it has seen without
    # generating examples one by one.
    examples: list[tuple[str, str]] | None = None

    @property
    def size(self) -> int:
        """Number of sequences in the batch."""
        return self.tgt_in.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The same batch on ``device``."""
        return Batch(
            src=None if self.src is None else self.src.to(device, non_blocking=non_blocking),
            tgt_in=self.tgt_in.to(device, non_blocking=non_blocking),
            tgt_out=self.tgt_out.to(device, non_blocking=non_blocking),
            n_tokens=self.n_tokens,
            examples=self.examples,
        )


def _id_rows_to_tensor(rows: list[str], width: int) -> torch.Tensor:
    """(B, width) long tensor from id strings (``Vocab.id_string``), right-padded with PAD.

    One join and one buffer conversion for the whole batch: far cheaper than
    ``torch.tensor`` over nested lists of Python ints.
    """
    flat = "".join([r.ljust(width, _PAD_CHAR) for r in rows])
    buf = bytearray(flat.encode(_UTF32_NATIVE))  # one int32 per id, in machine byte order
    return torch.frombuffer(buf, dtype=torch.int32).view(len(rows), width).long()


def _check_arch(arch: str) -> None:
    if arch not in ARCHS:
        raise ValueError(f"arch: {arch!r} is not one of {', '.join(ARCHS)}")


class Task:
    """Common interface of every task; see the module docstring for batch layout."""

    name: str
    vocab: Vocab
    is_lm: bool = False
    # Longest answer the task produces (bounds greedy decoding); None for char-lm.
    max_answer_len: int | None = None

    def __init__(self, config: TaskConfig) -> None:
        self.config = config
        self.name = config.name

    # -- examples ---------------------------------------------------------------
    def sample_input(self, rng: random.Random) -> str:
        """One random input, drawn only from ``rng`` (so a seed reproduces it)."""
        raise NotImplementedError

    def sample_inputs(self, rng: random.Random, n: int) -> list[str]:
        """``n`` random inputs; tasks override this with one draw for the whole batch."""
        return [self.sample_input(rng) for _ in range(n)]

    def solve(self, input_text: str) -> str:
        """The reference answer for ``input_text`` (which must pass ``validate_input``)."""
        raise NotImplementedError

    def example(self, rng: random.Random) -> tuple[str, str]:
        """A random ``(input, answer)`` pair."""
        text = self.sample_input(rng)
        return text, self.solve(text)

    def validate_input(self, text: str) -> str | None:
        """None if the model can be asked ``text``, else a one-line reason."""
        raise NotImplementedError

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        """A few inputs to offer in the UI: the tutorials' classics, then random ones."""
        out = [s for s in self._classic_inputs() if self.validate_input(s) is None][:n]
        rng = random.Random(f"display:{seed}")
        for _ in range(50 * n):
            if len(out) >= n:
                break
            s = self.sample_input(rng)
            if s not in out:
                out.append(s)
        return out

    def _classic_inputs(self) -> list[str]:
        return []

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """``n`` evaluation examples, distinct while the task has that many inputs.

        The generator is seeded from a string built on ``seed``, so even with
        the training seed it never replays the training stream (which uses
        ``random.Random(seed)``).
        """
        rng = random.Random(f"held-out:{seed}")
        space = self.input_space_size()
        want = n if space is None else min(n, space)
        seen: dict[str, str] = {}
        # Inputs are not drawn uniformly from the space, so collecting a small
        # space completely takes a few passes; the cap keeps this bounded.
        for _ in range(max(50 * n, 10_000)):
            if len(seen) >= want:
                break
            text, answer = self.example(rng)
            seen.setdefault(text, answer)
        pairs = list(seen.items())
        if not pairs:
            return []
        # A space smaller than n: repeat rather than return fewer than asked.
        return [pairs[i % len(pairs)] for i in range(n)]

    def input_space_size(self) -> int | None:
        """How many distinct inputs exist (None: effectively unbounded)."""
        return None

    # -- batches ----------------------------------------------------------------
    def batch(self, rng: random.Random, batch_size: int, arch: str) -> Batch:
        """A random training batch for ``arch``."""
        solve = self.solve
        return self.collate([(s, solve(s)) for s in self.sample_inputs(rng, batch_size)], arch)

    def collate(self, pairs: list[tuple[str, str]], arch: str) -> Batch:
        """A batch for the given ``(input, answer)`` pairs (unknown characters become UNK).

        Rows are assembled as id strings, with PAD standing in for "no loss" in
        ``tgt_out`` until one ``masked_fill`` turns it into ``IGNORE`` (answers
        never contain PAD). ``tgt_in`` and ``tgt_out`` share one conversion.
        """
        _check_arch(arch)
        if not pairs:
            raise ValueError("collate: no examples")
        ids = self.vocab.id_string
        inputs = [ids(i) for i, _ in pairs]
        answers = [ids(a) for _, a in pairs]
        if arch == "encoder-decoder":
            src = _id_rows_to_tensor(inputs, max(map(len, inputs)))  # (B, S)
            rows_in = [_BOS_CHAR + a for a in answers]
            rows_out = [a + _EOS_CHAR for a in answers]
        else:
            src = None
            # Sequence: input SEP answer EOS. tgt_out[j] predicts sequence[j+1]:
            # the first len(input) of those are the input's tail and SEP, no loss.
            rows_in = [i + _SEP_CHAR + a for i, a in zip(inputs, answers, strict=True)]
            rows_out = [
                _PAD_CHAR * len(i) + a + _EOS_CHAR for i, a in zip(inputs, answers, strict=True)
            ]
        both = _id_rows_to_tensor(rows_in + rows_out, max(map(len, rows_out)))  # (2B, T)
        tgt_in, tgt_out = both.view(2, len(pairs), -1)  # (B, T) each
        tgt_out = tgt_out.masked_fill(tgt_out == PAD, IGNORE)
        n_tokens = sum(map(len, answers)) + len(pairs)  # answer + EOS per row
        return Batch(src, tgt_in, tgt_out, n_tokens, examples=list(pairs))


def _quoted(chars: list[str]) -> str:
    """Up to three offending characters for a message, quoted so spaces show."""
    more = ", ..." if len(chars) > 3 else ""
    return ", ".join(repr(c) for c in chars[:3]) + more


def _outside(chars: list[str], vocab: Vocab) -> str:
    """'is/are outside the vocabulary', or 'not allowed here' for vocabulary characters."""
    verb = "is" if len(chars) == 1 else "are"
    if any(c not in vocab for c in chars):
        return f"{verb} outside the vocabulary"
    return f"{verb} not allowed here"


class DigitTask(Task):
    """copy, reverse and sort over digit strings of length ``min_len..max_len``."""

    vocab = DIGITS_VOCAB

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self.max_answer_len = config.max_len
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
            return f"{_quoted(bad)} {_outside(bad, self.vocab)}: type only the digits 0-9"
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


class AdditionTask(Task):
    """``a+b`` -> ``a + b`` for operands of 1..max_digits digits (no leading zeros)."""

    vocab = DIGITS_VOCAB

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self.max_answer_len = config.max_digits + 1
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
            return f"{_quoted(bad)} {_outside(bad, self.vocab)}: type digits and one '+'"
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


# -- char-lm ----------------------------------------------------------------------

# Typographic characters common in English text, spelt in ASCII.
_ASCII_SPELLING = {
    "‘": "'",
    "’": "'",
    "‚": "'",
    "“": '"',
    "”": '"',
    "„": '"',
    "–": "-",
    "—": "-",
    "−": "-",
    "…": "...",
    "ß": "ss",
    "\u00a0": " ",
    "\x0b": " ",
    "\x0c": " ",
}
_OUTSIDE_TEXT_VOCAB = re.compile("[^" + re.escape(TEXT_VOCAB.chars) + "]")


@lru_cache(maxsize=4096)
def _ascii_for(char: str) -> str:
    """Closest text in the vocabulary for one character: ASCII spelling, accents dropped, or a space."""
    if char in _ASCII_SPELLING:
        return _ASCII_SPELLING[char]
    if unicodedata.combining(char):
        return ""
    base = unicodedata.normalize("NFKD", char)
    base = "".join(c for c in base if c in TEXT_VOCAB)
    return base or " "


def to_text_vocab(text: str) -> str:
    """``text`` with line ends normalised and every character inside ``TEXT_VOCAB``.

    Characters outside it are spelt in ASCII where that is obvious (curly quotes,
    dashes, accented letters) and otherwise become a space, so the model never
    sees UNK in training.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _OUTSIDE_TEXT_VOCAB.sub(lambda m: _ascii_for(m.group()), text)


@lru_cache(maxsize=1)
def default_text() -> str:
    """Python's own help text (``pydoc_data.topics``): in every install, nothing to download."""
    from pydoc_data.topics import topics

    return to_text_vocab("\n".join(topics[key] for key in sorted(topics)))


def read_text_file(path: str) -> str:
    """A user's text file for char-lm, cleaned; errors are one-line ConfigErrors."""
    p = Path(path).expanduser()
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise ConfigError(f"task.text: {p} is a folder, not a text file")
        if size > MAX_TEXT_BYTES:
            raise ConfigError(
                f"task.text: {p} is {size / 2**20:.0f} MiB; the lab reads at most "
                f"{MAX_TEXT_BYTES // 2**20} MiB"
            )
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"task.text: {p}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"task.text: {p}: cannot read ({exc.strerror})") from None
    if b"\x00" in raw:
        raise ConfigError(f"task.text: {p}: not a text file")
    return to_text_vocab(raw.decode("utf-8", errors="replace"))


class CharLMTask(Task):
    """Next-character prediction on a text (the default: Python's help text).

    The text is encoded once into a uint8 tensor; batches are random windows of
    ``block_size + 1`` characters from the training split (the first
    ``1 - val_fraction`` of the text), indexed in one tensor operation.
    """

    vocab = TEXT_VOCAB
    is_lm = True

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(config)
        self.source = config.text or "<python help text>"
        self.text = read_text_file(config.text) if config.text else default_text()
        block = config.block_size
        split = int(len(self.text) * (1.0 - config.val_fraction))
        self.train_text = self.text[:split]
        self.val_text = self.text[split:]
        shortest = min(len(self.train_text), len(self.val_text))
        if shortest < block + 1:
            need = math.ceil((block + 1) / min(config.val_fraction, 1 - config.val_fraction))
            raise ConfigError(
                f"task.text: {self.source} has {len(self.text):,} characters; with "
                f"block_size {block} and val_fraction {config.val_fraction} it needs "
                f"at least {need:,}"
            )
        # Ids of TEXT_VOCAB fit a byte: a quarter of the memory of int32, and
        # windows are widened to long only after they are cut out.
        self.data = _encode_bytes(self.vocab, self.text)  # (N,) uint8
        self.train_data = self.data[:split]
        self.val_data = self.data[split:]
        # Every window of the training split as a view (no copy): row s holds
        # characters s..s+block-1, and the targets are the same windows shifted
        # by one. A batch is then one index_select per tensor.
        self._train_in = self.train_data[:-1].unfold(0, block, 1)  # (N-block, block)
        self._train_out = self.train_data[1:].unfold(0, block, 1)  # (N-block, block)
        self._val_in = self.val_data[:-1].unfold(0, block, 1)
        self._val_out = self.val_data[1:].unfold(0, block, 1)
        # Held-out pairs: half a window of prompt, then a short continuation;
        # both fit in one window, which the split check above guarantees.
        self._prompt_len = max(1, block // 2)
        self.max_continuation = max(1, min(LM_CONTINUATION, block - self._prompt_len))

    def sample_input(self, rng: random.Random) -> str:
        return self.example(rng)[0]

    def example(self, rng: random.Random) -> tuple[str, str]:
        """A ``(prompt, continuation)`` pair from the training split."""
        return self._pair_at(self.train_text, rng)

    def _pair_at(self, text: str, rng: random.Random) -> tuple[str, str]:
        start = rng.randrange(0, len(text) - self._prompt_len - self.max_continuation + 1)
        mid = start + self._prompt_len
        return text[start:mid], text[mid : mid + self.max_continuation]

    def solve(self, input_text: str) -> str:
        """How the text itself continues ``input_text`` (empty if it never occurs)."""
        at = self.text.find(input_text) if input_text else -1
        if at < 0:
            return ""
        end = at + len(input_text)
        return self.text[end : end + self.max_continuation]

    def validate_input(self, text: str) -> str | None:
        block = self.config.block_size
        if not text:
            return "empty input: type the start of a text for the model to continue"
        unknown = self.vocab.unknown_chars(text)
        if unknown:
            return f"{_quoted(unknown)} {_outside(unknown, self.vocab)}: type printable ASCII"
        if len(text) > block:
            return f"too long: {len(text)} characters; the model sees at most {block}"
        return None

    def examples_for_display(self, n: int = 5, seed: int = 0) -> list[str]:
        """Openings of lines from the text, cut at a word boundary."""
        rng = random.Random(f"display:{seed}")
        lines = [ln.strip() for ln in self.text.splitlines()]
        lines = [ln for ln in lines if len(ln) >= 20 and ln[0].isalpha()]
        out: list[str] = []
        for line in rng.sample(lines, min(len(lines), 20 * n)):
            cut = line[: min(32, self.config.block_size)]
            if " " in cut[8:]:
                cut = cut[: cut.rindex(" ") + 1]
            if cut not in out and self.validate_input(cut) is None:
                out.append(cut)
            if len(out) == n:
                break
        return out

    def held_out(self, n: int, seed: int) -> list[tuple[str, str]]:
        """``(prompt, next few characters)`` pairs from the validation split."""
        rng = random.Random(f"held-out:{seed}")
        return [self._pair_at(self.val_text, rng) for _ in range(n)]

    def batch(self, rng: random.Random, batch_size: int, arch: str = "decoder-only") -> Batch:
        """``batch_size`` random windows of the training split."""
        if arch != "decoder-only":
            raise ValueError("char-lm trains decoder-only models")
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        starts = torch.randint(0, len(self._train_in), (batch_size,), generator=g)  # (B,)
        return self._windows(self._train_in, self._train_out, starts)

    def val_batches(self, batch_size: int, max_batches: int) -> list[Batch]:
        """Deterministic validation batches: windows evenly spread over the validation split."""
        block = self.config.block_size
        last = len(self._val_in) - 1  # last window start
        available = last // block + 1  # non-overlapping windows that fit
        count = max(1, min(available, batch_size * max_batches))
        if count == 1:
            starts = torch.zeros(1, dtype=torch.long)
        else:
            starts = torch.linspace(0, last, count).round().long()  # (count,)
        return [
            self._windows(self._val_in, self._val_out, chunk) for chunk in starts.split(batch_size)
        ]

    @staticmethod
    def _windows(
        windows_in: torch.Tensor, windows_out: torch.Tensor, starts: torch.Tensor
    ) -> Batch:
        tgt_in = windows_in.index_select(0, starts).long()  # (B, block)
        tgt_out = windows_out.index_select(0, starts).long()  # (B, block)
        return Batch(src=None, tgt_in=tgt_in, tgt_out=tgt_out, n_tokens=tgt_out.numel())

    def collate(self, pairs: list[tuple[str, str]], arch: str = "decoder-only") -> Batch:
        """Batch of ``prompt + continuation``; loss only where the continuation is predicted."""
        if arch != "decoder-only":
            raise ValueError("char-lm trains decoder-only models")
        if not pairs:
            raise ValueError("collate: no examples")
        ids = self.vocab.id_string
        rows_in, rows_out = [], []
        for prompt, continuation in pairs:
            seq = ids(prompt + continuation)
            cut = max(1, len(prompt))  # first predicted character (the continuation's)
            rows_in.append(seq[:-1])
            # tgt_out[j] predicts seq[j+1]; PAD marks "no loss" until masked_fill.
            rows_out.append(_PAD_CHAR * (cut - 1) + seq[cut:])
        width = max(map(len, rows_out))
        both = _id_rows_to_tensor(rows_in + rows_out, width)  # (2B, T)
        tgt_in, tgt_out = both.view(2, len(pairs), -1)  # (B, T) each
        tgt_out = tgt_out.masked_fill(tgt_out == PAD, IGNORE)
        n_tokens = sum(len(r) - r.count(_PAD_CHAR) for r in rows_out)
        return Batch(None, tgt_in, tgt_out, n_tokens, examples=list(pairs))


def _encode_bytes(vocab: Vocab, text: str) -> torch.Tensor:
    """(N,) uint8 ids of ``text`` (vocabularies of up to 256 ids)."""
    if len(vocab) > 256:
        raise ValueError("char-lm vocabularies must have at most 256 ids")
    return torch.frombuffer(bytearray(vocab.id_string(text).encode("latin-1")), dtype=torch.uint8)


def make_task(task: TaskConfig) -> Task:
    """The task a ``TaskConfig`` describes (char-lm reads its text here)."""
    if task.name in ("copy", "reverse", "sort"):
        return DigitTask(task)
    if task.name == "addition":
        return AdditionTask(task)
    if task.name == "char-lm":
        return CharLMTask(task)
    raise ConfigError(f"task.name: unknown task {task.name!r}")
